"""Startup fails in production while a setting is unsafe.

Production is DEBUG off with a host of its own in ALLOWED_HOSTS (the zero-setup
run and the tests serve only loopback names). There each check below is an
Error, so `manage.py check`, `migrate`, `runserver` and the web process
(config/asgi.py calls `fail_on_unsafe_settings`) refuse to start; elsewhere
nothing is reported. `manage.py check --deploy` adds Django's own checks. An
operator who accepts one risk on purpose lists its id in SILENCED_SYSTEM_CHECKS.
"""

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
    return found


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
