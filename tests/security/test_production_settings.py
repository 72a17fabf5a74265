"""Production refuses to start with unsafe settings; pages carry HSTS and a Content-Security-Policy."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from foundation.checks import ZERO_SETUP_SECRET_KEY, is_production, production_settings_check

ROOT = Path(__file__).resolve().parents[2]
SAFE = {
    "DEBUG": "false",
    "ALLOWED_HOSTS": "leads.example.com",
    "SITE_URL": "https://leads.example.com",
    "SECRET_KEY": "k3y-" + "a1b2c3d4e5" * 6,
    "TRUSTED_PROXY_COUNT": "1",
    "RECAPTCHA_SECRET_KEY": "recaptcha-secret",
    "CRM_WEBHOOK_URL": "https://crm.example.com/hooks/profile",
    "CRM_SIGNING_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
}


def run(args, tmp_path, **overrides):
    env = {k: v for k, v in os.environ.items() if k not in SAFE and not k.startswith(("DATABASE_", "REDIS_"))}
    env.update({**SAFE, "DATA_DIR": str(tmp_path)})
    env.update({name: os.environ[name] for name in ("DATABASE_URL", "REDIS_URL")})
    env.update(overrides)
    env = {k: v for k, v in env.items() if v is not None}
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


UNSAFE = {"SECRET_KEY": None, "SECURE_HSTS_SECONDS": "0", "SECURE_SSL_REDIRECT": "false",
          "SITE_URL": "http://leads.example.com", "RECAPTCHA_SECRET_KEY": "", "CRM_SIGNING_SECRET": ""}  # fmt: skip


def test_the_web_process_refuses_unsafe_production_settings_and_starts_with_safe_ones(tmp_path):
    web = run(["-c", "import config.asgi"], tmp_path, **UNSAFE)
    assert web.returncode != 0
    assert all(f"security.E10{n}" in web.stderr for n in (1, 2, 3, 4, 6, 7)), web.stderr
    safe = run(["-c", "import config.asgi"], tmp_path)
    assert safe.returncode == 0, safe.stderr


@pytest.fixture
def production(settings):
    settings.DEBUG = False
    settings.ALLOWED_HOSTS = ["leads.example.com"]
    settings.SECRET_KEY = SAFE["SECRET_KEY"]
    settings.SECURE_HSTS_SECONDS = 31536000
    settings.SECURE_SSL_REDIRECT = True
    settings.SESSION_COOKIE_SECURE = settings.CSRF_COOKIE_SECURE = True
    settings.RECAPTCHA_SECRET_KEY = "recaptcha-secret"
    settings.CRM_WEBHOOK_URL = SAFE["CRM_WEBHOOK_URL"]
    settings.CRM_SIGNING_SECRET = SAFE["CRM_SIGNING_SECRET"]
    return settings


@pytest.mark.parametrize(
    ("unsafe", "check_id"),
    [
        ({"SECRET_KEY": ZERO_SETUP_SECRET_KEY}, "security.E101"),
        ({"SECURE_HSTS_SECONDS": 0}, "security.E102"),
        ({"SECURE_SSL_REDIRECT": False}, "security.E103"),
        ({"SESSION_COOKIE_SECURE": False}, "security.E104"),
        ({"SECURE_PROXY_SSL_HEADER": ("HTTP_X_FORWARDED_PROTO", "https"), "TRUSTED_PROXY_COUNT": 0}, "security.E105"),
        ({"RECAPTCHA_SECRET_KEY": ""}, "security.E106"),
        ({"CRM_SIGNING_SECRET": ""}, "security.E107"),
        # The stand-ins of `make run`: their inbox, or any outside service's address on this machine.
        ({"STANDINS_URL": "http://127.0.0.1:41000/"}, "security.E108"),
        ({"PIPEDRIVE_API_URL": "http://127.0.0.1:41001"}, "security.E108"),
        ({"AUTH0_DOMAIN": "http://localhost:41002"}, "security.E108"),
        ({"IMAP_HOST": "::1"}, "security.E108"),
        ({"CHAT_AGENT_URL": "ws://[::1]:41003/agent"}, "security.E108"),
    ],
)
def test_manage_commands_refuse_each_unsafe_setting(production, unsafe, check_id):
    call_command("check")  # safe: passes
    for name, value in unsafe.items():
        setattr(production, name, value)
    with pytest.raises(SystemCheckError, match=check_id):
        call_command("check")
    production.SILENCED_SYSTEM_CHECKS = [check_id]
    call_command("check")


def test_the_zero_setup_run_is_not_production(settings):
    assert not is_production() and production_settings_check() == []


def test_a_forwarded_proto_is_not_believed_without_a_trusted_proxy(client, settings):
    settings.SECURE_SSL_REDIRECT = True
    assert settings.TRUSTED_PROXY_COUNT == 0 and settings.SECURE_PROXY_SSL_HEADER is None
    response = client.get("/", HTTP_X_FORWARDED_PROTO="https")
    assert response.status_code == 301 and response["Location"].startswith("https://")


@pytest.mark.django_db
def test_pages_carry_hsts_and_a_content_security_policy(client, settings):
    settings.SECURE_HSTS_SECONDS = 31536000
    response = client.get("/", secure=True)
    assert response["Strict-Transport-Security"].startswith("max-age=31536000")
    policy = response["Content-Security-Policy"]
    assert "default-src 'self'" in policy and "frame-ancestors 'none'" in policy and "object-src 'none'" in policy
