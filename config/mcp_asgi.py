"""The MCP server's ASGI application, served by uvicorn as its own process (the Procfile's `mcp`).

    uvicorn config.mcp_asgi:application

The SDK's streamable HTTP app needs its session manager running, which it
starts in the ASGI lifespan; daphne implements no lifespan, and bench/mcp
measured daphne's own cost per request at about the CPU of a whole bare SDK
call. So
the MCP server runs under uvicorn, which runs the lifespan before it serves
(and exits if it fails), next to daphne. In production the reverse proxy of
the site sends `/mcp` and `/.well-known/oauth-protected-resource/mcp` to
this process, so the MCP server is on the site's own host; `make run`
starts it with the rest (honcho: port PORT + 300).

`GET /healthz` answers 200 once the lifespan has started the session
manager; the web process's /readyz asks it (MCP_INTERNAL_URL). Unconfigured
(no AUTH0_DOMAIN or MCP_AUDIENCE), the process answers /mcp with a 404 that
says so, and /healthz all the same.
"""

import gc
import logging
import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django.setup()

from config.sentry import reported, sentry_init  # noqa: E402  (after django.setup)
from docs_mcp.server import application_from_settings  # noqa: E402  (after django.setup)

sentry_init()
application = reported(application_from_settings())
# No access log line per request, as the web process writes none (deploy/supervisor/web.conf): nginx logs every
# request and each tool call is recorded on the caller's profile; the line is CPU spent on every call (bench/mcp).
logging.getLogger("uvicorn.access").setLevel(logging.WARNING)
# Everything imported and built so far lives as long as the process: out of the collector's way.
gc.freeze()
