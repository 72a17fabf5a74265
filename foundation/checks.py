"""Startup fails in production while a setting is unsafe.

Production is DEBUG off with a host of its own in ALLOWED_HOSTS (the zero-setup
run and the tests serve only loopback names). There each check below is an
Error, so `manage.py check`, `migrate`, `runserver` and the web process
(config/asgi.py calls `fail_on_unsafe_settings`) refuse to start; elsewhere
nothing is reported. `manage.py check --deploy` adds Django's own checks. An
operator who accepts one risk on purpose lists its id in SILENCED_SYSTEM_CHECKS.
"""

import ipaddress
from urllib.parse import urlsplit

from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured

ZERO_SETUP_SECRET_KEY = "insecure-zero-setup-key-change-me-in-production"
LOCAL_HOSTS = {"localhost", "127.0.0.1", "[::1]", "::1", "testserver"}


def is_production() -> bool:
    return not settings.DEBUG and any(host not in LOCAL_HOSTS for host in settings.ALLOWED_HOSTS)


def _unsafe_settings() -> list[tuple[str, str, str]]:
    """(id, problem, what to set) for every unsafe setting."""
    found = []
    key = settings.SECRET_KEY
    if key == ZERO_SETUP_SECRET_KEY or len(key) < 50 or len(set(key)) < 5:
        found.append(("security.E101", "SECRET_KEY is the zero-setup default or too short.",
                      "Set SECRET_KEY to 50 or more random characters."))  # fmt: skip
    if settings.SECURE_HSTS_SECONDS < 1:
        found.append(("security.E102", "HSTS is off.", "Set SECURE_HSTS_SECONDS (31536000: a year)."))
    if not settings.SECURE_SSL_REDIRECT:
        found.append(("security.E103", "Plain-HTTP requests are not redirected to HTTPS.",
                      "Set SECURE_SSL_REDIRECT=true."))  # fmt: skip
    if not (settings.SESSION_COOKIE_SECURE and settings.CSRF_COOKIE_SECURE):
        found.append(("security.E104", "Session and CSRF cookies may travel over plain HTTP.",
                      "Set SITE_URL to the https:// address, or SESSION_COOKIE_SECURE=true."))  # fmt: skip
    if settings.SECURE_PROXY_SSL_HEADER and not settings.TRUSTED_PROXY_COUNT:
        found.append(("security.E105", "X-Forwarded-Proto is trusted though no proxy is declared.",
                      "Set TRUSTED_PROXY_COUNT to the number of proxies in front of the app."))  # fmt: skip
    if not settings.RECAPTCHA_SECRET_KEY:
        found.append(("security.E106", "reCAPTCHA is off: the lead form is open to bots.",
                      "Set RECAPTCHA_SECRET_KEY and RECAPTCHA_SITE_KEY."))  # fmt: skip
    if settings.CRM_WEBHOOK_URL and not settings.CRM_SIGNING_SECRET:
        found.append(("security.E107", "Profile webhooks to the CRM are sent unsigned.",
                      "Set CRM_SIGNING_SECRET (whsec_…)."))  # fmt: skip
    if stand_ins := _stand_in_addresses():
        found.append(("security.E108", f"Outside services point at local stand-ins: {', '.join(stand_ins)}.",
                      "Unset STANDINS_URL and set each service's real address (docs/configuration.md)."))  # fmt: skip
    return found


def _outside_service_addresses() -> dict[str, str]:
    return {
        "MAILGUN_API_URL": settings.ANYMAIL.get("MAILGUN_API_URL", ""),
        "RECAPTCHA_VERIFY_URL": settings.RECAPTCHA_VERIFY_URL,
        "LLM_BASE_URL": settings.LLM_BASE_URL,
        "PIPEDRIVE_API_URL": settings.PIPEDRIVE_API_URL,
        "CLICKUP_API_URL": settings.CLICKUP_API_URL,
        "IMAP_HOST": settings.IMAP_HOST,
        "CRM_WEBHOOK_URL": settings.CRM_WEBHOOK_URL,
        "KAPA_API_URL": settings.KAPA_API_URL,
        "AUTH0_DOMAIN": settings.AUTH0_DOMAIN,
        "V0_API_URL": settings.V0_API_URL,
        "FACEBOOK_GRAPH_URL": settings.FACEBOOK_GRAPH_URL,
        "CHAT_AGENT_URL": settings.CHAT_AGENT_URL,
        "WORDPRESS_API_URL": settings.WORDPRESS_API_URL,
    }


def _stand_in_addresses() -> list[str]:
    """STANDINS_URL, and every outside service whose address is this machine: where the stand-ins listen."""
    found = ["STANDINS_URL"] if settings.STANDINS_URL else []
    for name, address in _outside_service_addresses().items():
        host = _host(address).lower()
        if host == "localhost" or host.endswith(".localhost") or _is_loopback(host):
            found.append(name)
    return found


def _host(address: str) -> str:
    """The host of a URL, or of a bare `host`, `host:port` or IPv6 address (IMAP_HOST, AUTH0_DOMAIN)."""
    if "//" in address:
        return urlsplit(address).hostname or ""
    if address.count(":") == 1:
        return address.partition(":")[0]
    return address.strip("[]")


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@checks.register(checks.Tags.security)
def production_settings_check(app_configs=None, **kwargs):
    if not is_production():
        return []
    return [checks.Error(problem, hint=hint, id=check_id) for check_id, problem, hint in _unsafe_settings()]


def fail_on_unsafe_settings() -> None:
    """For processes Django's checks do not gate (daphne): raise unless every production check passes."""
    errors = [
        message
        for message in production_settings_check()
        if message.id not in settings.SILENCED_SYSTEM_CHECKS and message.is_serious()
    ]
    if errors:
        lines = "\n".join(f"{error.id}: {error.msg} {error.hint}" for error in errors)
        raise ImproperlyConfigured(f"Unsafe production settings:\n{lines}")
