"""Errors reported to Sentry (sentry-sdk) when SENTRY_DSN is set, with personal data redacted before they leave.

Every process of ours starts it: the web process (config.asgi), a WSGI server
(config.wsgi), the MCP server (config.mcp_asgi), and Celery's workers and beat,
which import this module when they start (CELERY_IMPORTS) and start it on
their start signals; a worker does so before it starts its pool, whose
processes inherit the client.

What is sent: sentry-sdk leaves cookies, the signed-in user and the client's
address out (send_default_pii=False); `before_send` then runs crm.redaction
over the free text an event carries (exception messages, the local variables
of each frame, log messages, breadcrumbs, the request's URL, query string and
body, extra data) and keeps only request headers that name nothing personal
or secret: sentry-sdk's own list of sensitive headers does not know ours
(X-Chat-Api-Key, X-Service-Key, X-User-IP…).

Its layer: the redaction is crm's, which no foundation module may import, so
this module sits in the layer just above crm (.importlinter), below every
entry point that starts it.
"""

from urllib.parse import unquote, unquote_plus

import sentry_sdk
from celery.signals import beat_init, celeryd_init
from django.conf import settings
from sentry_sdk.integrations.asgi import SentryAsgiMiddleware
from sentry_sdk.integrations.celery import CeleryIntegration
from sentry_sdk.integrations.django import DjangoIntegration
from sentry_sdk.integrations.logging import ignore_logger

from crm.redaction import redact

# Request headers an event keeps (values redacted too); any other may hold a key, a token or an address.
KEPT_HEADERS = frozenset(
    {"accept", "accept-encoding", "accept-language", "content-length", "content-type", "host", "origin", "referer",
     "user-agent"}
)  # fmt: skip


def sentry_init() -> None:
    """Start reporting to SENTRY_DSN, once per process; nothing when it is empty."""
    if not settings.SENTRY_DSN or sentry_sdk.get_client().is_active():
        return
    sentry_sdk.init(
        dsn=settings.SENTRY_DSN,
        environment=settings.SENTRY_ENVIRONMENT or None,  # None: sentry-sdk's default, "production"
        release=settings.SENTRY_RELEASE or None,  # None: sentry-sdk finds one (the git commit, …)
        # 0 leaves tracing off altogether (None), rather than an unsampled transaction for every request.
        traces_sample_rate=settings.SENTRY_TRACES_SAMPLE_RATE or None,
        send_default_pii=False,
        # Only the integrations named here: the auto-enabled ones (Redis, httpx…) would add a breadcrumb to
        # every cache call of every request.
        auto_enabling_integrations=False,
        integrations=[DjangoIntegration(), CeleryIntegration()],
        before_send=redacted,
        before_send_transaction=redacted,
    )
    # Its request_failed line repeats the error the Django integration reports (sentry-sdk ignores django.request's
    # for the same reason).
    ignore_logger("django_structlog.middlewares.request")


def reported(application):
    """An ASGI application with each request in a Sentry scope of its own while Sentry is on (else as it is).

    sentry-sdk does this for Django by patching ASGIHandler.__call__, which our
    handler overrides (config.asgi_handler), and the MCP server is Starlette; without
    it, every request would share one scope, its breadcrumbs and request data.
    """
    return SentryAsgiMiddleware(application) if sentry_sdk.get_client().is_active() else application


def redacted(event, hint):
    """`before_send`: the event, already serialized to plain values, with its free text redacted."""
    for exception in _values(event, "exception"):
        _redact_in(exception, "value")
        for frame in (exception.get("stacktrace") or {}).get("frames") or []:
            _redact_in(frame, "vars")
    for breadcrumb in _values(event, "breadcrumbs"):
        _redact_in(breadcrumb, "message", "data")
    for span in event.get("spans") or []:
        _redact_in(span, "description", "data")
    _redact_in(event, "logentry", "message", "extra")
    if request := event.get("request"):
        _redact_in(request, "url", "data")
        if "query_string" in request:
            request["query_string"] = redact(unquote_plus(request["query_string"]))
        headers = request.get("headers") or {}
        request["headers"] = {name: _redacted(value) for name, value in headers.items() if name.lower() in KEPT_HEADERS}
    return event


def _values(event, key: str) -> list:
    return (event.get(key) or {}).get("values") or []


def _redact_in(container: dict, *keys: str) -> None:
    for key in keys:
        if key in container:
            container[key] = _redacted(container[key])


def _redacted(value):
    if isinstance(value, str):
        # Decoded first: the redaction would not see the address in `?email=ada%40example.com` (a URL, a request's
        # repr among a frame's variables).
        return redact(unquote(value))
    if isinstance(value, dict):
        return {_redacted(key): _redacted(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_redacted(item) for item in value]
    return value


@celeryd_init.connect
@beat_init.connect
def _celery_started(**kwargs):
    sentry_init()
