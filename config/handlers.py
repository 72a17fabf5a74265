"""Django's ASGI handler, with the middleware chain and the view run in one thread hand-off per request."""

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIHandler


class SyncChainASGIHandler(ASGIHandler):
    """Runs the whole middleware chain and the view synchronously, in one `sync_to_async` call.

    Django's own ASGIHandler builds an async chain: every MiddlewareMixin hook
    (sessions, CSRF, auth, messages… ten middlewares here) then runs in its own
    thread hand-off, and WhiteNoise, being sync-only, adds a hop back to the
    event loop. That was 15 hand-offs per request, each costing a Future, a
    context copy and two thread wake-ups (tests/config/test_asgi.py counts 3 now). Our views are sync (DRF), so nothing
    gains from the async chain: one hand-off into the request's thread for all
    of it is what WSGI would do, and daphne still serves everything else
    (request bodies, responses, channels' websockets) on its event loop.
    An async view still works: Django runs it with async_to_sync, as under WSGI.
    bench/intake measured the difference.
    """

    def load_middleware(self, is_async=False):
        super().load_middleware(is_async=False)
        self._middleware_chain = sync_to_async(self._middleware_chain, thread_sensitive=True)
