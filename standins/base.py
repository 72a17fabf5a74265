"""What every stand-in shares: a record of what it received, and the way it is started and pointed at.

A stand-in is a real server on a loopback port. Tests use it as a context manager with knobs (failure
modes, delays); `make run` starts every one of them through `python -m standins`, which points the
product's settings at them with `settings()` and shows `received()` on its inbox page.
"""

import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime


@dataclass(frozen=True)
class Received:
    """One thing a stand-in received, as a person would want to see it on the inbox page."""

    service: str  # the stand-in's name, e.g. "mailgun"
    kind: str  # what it was, e.g. "email", "person", "note", "task", "delivery"
    title: str  # one line: a subject, a person's name, a task's name
    body: str = ""  # plain text; an email's body as its reader sees it
    html: str = ""  # an email's HTML part, shown sandboxed
    detail: dict = field(default_factory=dict)  # the rest, shown as JSON (e.g. a signature check's verdict)
    at: datetime = field(default_factory=lambda: datetime.now(UTC))


class StandIn:
    """A stand-in's common surface. Subclasses set `name` and implement start/stop/settings."""

    name = ""

    def __init__(self):
        self._received: list[Received] = []
        self._received_lock = threading.Lock()

    # --- lifecycle: start() serves in the background; port 0 means a free port -----------------
    def start(self) -> "StandIn":
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # --- what `make run` needs ---------------------------------------------------------------------
    def settings(self) -> dict[str, str]:
        """Environment variables that point the product at this stand-in (URL, keys it accepts)."""
        raise NotImplementedError

    def record(self, item: Received) -> None:
        with self._received_lock:
            self._received.append(item)
            del self._received[:-500]  # the inbox shows the latest; a long demo must not grow without end

    def received(self) -> list[Received]:
        with self._received_lock:
            return list(self._received)
