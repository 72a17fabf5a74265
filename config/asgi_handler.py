"""Django's ASGI handler, with the middleware chain and the view run in one thread hand-off per request, on a
thread reused from earlier requests."""

import asyncio
import collections
import threading
from concurrent.futures import ThreadPoolExecutor

from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.conf import settings
from django.core.handlers.asgi import ASGIHandler
from django.http import HttpResponse

from foundation.limits import BODY_TOO_SLOW, PAYLOAD_TOO_LARGE, body_limit


class BodyRefused(Exception):
    def __init__(self, status: int, body: bytes):
        self.response = HttpResponse(body, status=status, content_type="application/json")


# Idle request threads kept for the next requests; more are made as needed, and those beyond this many end
# when their request does. A few hundred idle threads cost a few MiB.
IDLE_REQUEST_THREADS_MAX = 256


class RequestThread(ThreadPoolExecutor):
    """One request's thread: one call at a time, as asgiref's per-request context needs (Django's
    connections and close_old_connections are per thread), and it knows whether a call is still running."""

    def __init__(self):
        super().__init__(max_workers=1, thread_name_prefix="django-request")
        self._lock = threading.Lock()
        self._running = 0

    def submit(self, fn, /, *args, **kwargs):
        with self._lock:
            self._running += 1
        future = super().submit(fn, *args, **kwargs)
        future.add_done_callback(self._finished)
        return future

    def _finished(self, _future):
        with self._lock:
            self._running -= 1

    @property
    def busy(self) -> bool:
        with self._lock:
            return self._running > 0


class RequestThreads:
    """Threads for requests, reused: asgiref's ThreadSensitiveContext() makes a thread per request and, at
    its end, another thread to join the first; a thread start blocks the event loop until the new thread
    has run, and behind other threads holding the GIL that is milliseconds each time: a thousand SSE
    streams ending together held up the events of the streams still open (bench/sse). asgiref takes a
    caller-owned executor for exactly this. A thread whose request left a call running (the client went
    away mid-view) is not reused, so no request queues behind another's leftover work."""

    def __init__(self, idle_max: int = IDLE_REQUEST_THREADS_MAX):
        self.idle_max = idle_max
        self._idle: collections.deque[RequestThread] = collections.deque()

    def take(self) -> RequestThread:
        try:
            return self._idle.pop()  # the most recently used: its stack is still warm
        except IndexError:
            return RequestThread()

    def give_back(self, thread: RequestThread) -> None:
        if thread.busy or len(self._idle) >= self.idle_max:
            thread.shutdown(wait=False)  # ends after its last call; nothing waits for it
        else:
            self._idle.append(thread)

    @property
    def idle(self) -> int:
        return len(self._idle)


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
    The request's thread comes from RequestThreads.
    """

    request_threads = RequestThreads()

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        thread = self.request_threads.take()
        try:
            async with ThreadSensitiveContext(executor=thread):
                await self.handle(scope, receive, send)
        finally:
            self.request_threads.give_back(thread)

    async def handle(self, scope, receive, send):
        """Django's handling, with the body bounded by the route's limit (foundation/limits.py) and
        REQUEST_BODY_TIMEOUT_SECONDS while Django reads it, before it spools it to a file."""
        limit = body_limit(scope.get("path", ""), scope.get("root_path", ""))
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
