"""How large a request body may be, per route, and the ASGI side of enforcing it.

The web process enforces the limit twice: in daphne while the body arrives
(config/serve.py: 413 as soon as the limit is passed, before twisted buffers
the rest, and 408 when the body takes longer than REQUEST_BODY_TIMEOUT_SECONDS),
and in the ASGI handler (config/handlers.py) for any other ASGI server, before
Django spools the body to a temporary file. Content-Length is checked first
when given; a chunked body is counted as it comes.
"""

from django.conf import settings

PAYLOAD_TOO_LARGE = b'{"error": {"code": "too_large", "message": "Request body is too large."}}'
BODY_TOO_SLOW = b'{"error": {"code": "timeout", "message": "The request body took too long to arrive."}}'


def body_limit(path: str) -> int:
    """Bytes a request body to `path` may have: the route's own limit, else REQUEST_MAX_BODY_BYTES."""
    routes = {
        "/api/leads": settings.LEADS_MAX_BODY_BYTES,
        "/docs-activity": 4096,
        "/api/tracking/mcp-events": 16 * 1024,
    }
    return routes.get(path.rstrip("/") or "/", settings.REQUEST_MAX_BODY_BYTES)
