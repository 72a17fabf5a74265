"""Django's ASGI handler, with the middleware chain and the view run in one thread hand-off per request."""

import asyncio

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.handlers.asgi import ASGIHandler
from django.http import HttpResponse

from config.limits import BODY_TOO_SLOW, PAYLOAD_TOO_LARGE, body_limit


class BodyRefused(Exception):
    def __init__(self, status: int, body: bytes):
        self.response = HttpResponse(body, status=status, content_type="application/json")


class SyncChainASGIHandler(ASGIHandler):
    """Runs the whole middleware chain and the view synchronously, in one `sync_to_async` call.

    Django's own ASGIHandler builds an async chain: every MiddlewareMixin hook
    (sessions, CSRF, auth, messages… ten middlewares here) runs in its own
    thread hand-off, and WhiteNoise, being sync-only, adds a hop back to the
    event loop; each hand-off costs a Future, a context copy and two thread
    wake-ups. Our views are sync (DRF), so nothing gains from the async chain:
    one hand-off into the request's thread for all of it is what WSGI would do
    (tests/config/test_asgi.py counts them; bench/intake measures the
    throughput), and daphne still serves everything else (request bodies,
    responses, channels' websockets) on its event loop.
    An async view still works: Django runs it with async_to_sync, as under WSGI.
    """

    async def handle(self, scope, receive, send):
        """Django's handling, with the body bounded by the route's limit (config/limits.py) and
        REQUEST_BODY_TIMEOUT_SECONDS while Django reads it, before it spools it to a file."""
        limit = body_limit(scope.get("path", ""))
        declared = dict(scope.get("headers") or []).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > limit:
            return await self.send_response(BodyRefused(413, PAYLOAD_TOO_LARGE).response, send)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + settings.REQUEST_BODY_TIMEOUT_SECONDS
        received, body_done = 0, False

        async def bounded_receive():
            nonlocal received, body_done
            if body_done:  # Django keeps listening for the disconnect while it answers
                return await receive()
            try:
                message = await asyncio.wait_for(receive(), max(deadline - loop.time(), 0))
            except TimeoutError:
                raise BodyRefused(408, BODY_TOO_SLOW) from None
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyRefused(413, PAYLOAD_TOO_LARGE)
                body_done = not message.get("more_body", False)
            return message

        try:
            return await super().handle(scope, bounded_receive, send)
        except BodyRefused as refused:
            await self.send_response(refused.response, send)

    def load_middleware(self, is_async=False):
        super().load_middleware(is_async=False)
        self._middleware_chain = sync_to_async(self._middleware_chain, thread_sensitive=True)
