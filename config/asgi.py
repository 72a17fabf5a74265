import functools
import gc
import os

import django
from channels.routing import ProtocolTypeRouter, URLRouter
from twisted.web import http as twisted_http

from config.asgi_handler import SyncChainASGIHandler
from config.sentry import reported, sentry_init
from foundation.checks import fail_on_unsafe_settings

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django.setup(set_prefix=False)  # as django.core.asgi.get_asgi_application does, with our handler below
fail_on_unsafe_settings()  # daphne runs no system checks: refuse to serve with unsafe production settings
sentry_init()  # before the handler loads the middleware, which sentry-sdk instruments
django_asgi_app = reported(SyncChainASGIHandler())

# daphne holds the objects of every open stream (a thousand SSE responses and their relays, bench/sse) for
# minutes, and the collector's default thresholds walk them all several times a second: nearly half of the
# process's time in that bench. The modules and settings loaded by now are left out of collections for good
# (gc.freeze), and the young generation is collected every 50,000 allocations instead of 700, so fewer
# short-lived objects survive into the older generations that full collections walk.
gc.freeze()
gc.set_threshold(50_000, 20, 20)

# daphne's HTTP parser (Twisted) builds an email message for every POST's Content-Type, only to spot form
# bodies: about 0.1 ms a request, and a tenth of daphne's time when chats start in a burst (bench/chat).
# The answer depends on the header's bytes alone, so a bounded memo returns the same at no cost.
twisted_http._parseContentType = functools.lru_cache(maxsize=256)(twisted_http._parseContentType)

# WebSocket routes join here as the chat flow lands; HTTP (pages, API, SSE) is Django.
application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": URLRouter([]),
    }
)
