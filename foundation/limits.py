"""How large a request body may be, per route, and the ASGI side of enforcing it.

The web process enforces the limit twice: in daphne while the body arrives
(config/serve.py: 413 as soon as the limit is passed, before twisted buffers
the rest, and 408 when the body takes longer than REQUEST_BODY_TIMEOUT_SECONDS),
and in the ASGI handler (config/asgi_handler.py) for any other ASGI server, before
Django spools the body to a temporary file. Content-Length is checked first
when given; a chunked body is counted as it comes.

The route is the one Django's URL resolver picks for the request, so a path
spelled otherwise (`/api/lead%73`, `/api%2Fleads`, or under a root path the
client named in daphne's `Daphne-Root-Path` header) gets that route's limit.

Before any body, config/serve.py also bounds the connection itself: its request
head must arrive within REQUEST_HEAD_TIMEOUT_SECONDS (408), and one client may
hold at most MAX_CONNECTIONS_PER_IP connections to the process (429).
"""

from django.conf import settings
from django.core.handlers.asgi import get_script_prefix
from django.urls import Resolver404, resolve

PAYLOAD_TOO_LARGE = b'{"error": {"code": "too_large", "message": "Request body is too large."}}'
BODY_TOO_SLOW = b'{"error": {"code": "timeout", "message": "The request body took too long to arrive."}}'
HEAD_TOO_SLOW = b'{"error": {"code": "timeout", "message": "The request took too long to arrive."}}'
TOO_MANY_CONNECTIONS = (
    b'{"error": {"code": "too_many_connections", "message": "Too many connections from this address; close some."}}'
)
TOO_MANY_CONNECTIONS_RETRY_SECONDS = 5
# How deep a JSON body may nest (objects and arrays, the outermost counted): every body the API takes is a
# few levels deep; a deeper one is refused by the parser (foundation.parsers) before any view or serializer walks it.
JSON_MAX_DEPTH = 32


def body_limit(path: str, root_path: str = "") -> int:
    """Bytes a request body may have: its route's own limit, else REQUEST_MAX_BODY_BYTES. `path` and
    `root_path` as an ASGI scope has them (percent-decoded); the route is the view Django resolves them to."""
    try:
        view_name = resolve(routed_path(path, root_path)).view_name
    except Resolver404:
        return settings.REQUEST_MAX_BODY_BYTES
    routes = {
        "leads-create": settings.LEADS_MAX_BODY_BYTES,
        "docs-activity": 4096,
        "tracking-mcp-events": 16 * 1024,
        "chat-stream": settings.CHAT_MAX_BODY_BYTES,
        "sources-webhook": settings.SOURCES_MAX_BODY_BYTES,
    }
    return routes.get(view_name, settings.REQUEST_MAX_BODY_BYTES)


def routed_path(path: str, root_path: str = "") -> str:
    """The path Django's URL resolver matches for a scope's `path` and `root_path`: ASGIRequest's path_info."""
    script_name = get_script_prefix({"root_path": root_path})
    return path.removeprefix(script_name) if script_name else path
