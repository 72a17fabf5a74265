"""How the HTTP stand-ins serve: aiohttp on an event loop of their own, in a background thread (tests, the
launcher) or as a process of its own until SIGINT or SIGTERM (`python -m standins.<name>`, the benchmarks).

One event loop per stand-in: any number of requests wait on a delay or a stream at once without a thread
each, which the benchmarks need of an upstream, and a test's thread only reads what the handlers keep.
"""

import asyncio
import contextlib
import signal
import threading
from collections import Counter
from concurrent.futures import Future

from aiohttp import web

from standins.base import StandIn


class AiohttpStandIn(StandIn):
    """Subclasses set `name` and add their routes in `routes`; `port=0` takes a free port."""

    client_max_size = 1024 * 1024  # request bodies, as aiohttp's default

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0):
        super().__init__()
        self.host, self.port = host, port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None

    def routes(self, app: web.Application) -> None:
        raise NotImplementedError

    @property
    def origin(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def address(self) -> tuple[str, int]:
        return (self.host, self.port)

    def start(self) -> "AiohttpStandIn":
        self._loop = asyncio.new_event_loop()
        started: Future = Future()
        self._thread = threading.Thread(target=self._serve, args=(started,), daemon=True, name=f"standin-{self.name}")
        self._thread.start()
        started.result(timeout=10)  # raises what stopped it, e.g. a port already taken
        return self

    def _serve(self, started: Future) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            app = web.Application(client_max_size=self.client_max_size)
            self.routes(app)
            self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1)
            self._loop.run_until_complete(self._runner.setup())
            # backlog: a benchmark's hundreds of clients may connect at once.
            site = web.TCPSite(self._runner, self.host, self.port, backlog=4096)
            self._loop.run_until_complete(site.start())
            self.port = self._runner.addresses[0][1]
        except BaseException as exc:  # handed to start(), which raises it
            self._loop.close()
            started.set_exception(exc)
            return
        started.set_result(None)
        self._loop.run_forever()
        # What stop() left running (a stalled stream's handler) ends here, so nothing is destroyed pending.
        pending = asyncio.all_tasks(self._loop)
        for task in pending:
            task.cancel()
        self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        self._loop.close()

    def stop(self) -> None:
        if self._loop is None or self._loop.is_closed():
            return
        # A stalled stream keeps its handler past the runner's cleanup; the loop's end cancels it.
        with contextlib.suppress(TimeoutError):
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    def serve_until_signalled(self) -> None:
        """Serve until SIGINT or SIGTERM (Ctrl-C, or a launcher or benchmark stopping it), then stop."""
        stopping = threading.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stopping.set())
        self.start()
        print(f"{self.name} stand-in at {self.origin}", flush=True)
        stopping.wait()
        self.stop()


def duplicates(identities) -> int:
    """How many records beyond the first share an identity (what a retried delivery must not make)."""
    return sum(count - 1 for count in Counter(identities).values() if count > 1)
