"""DRF throttles that count requests per fixed window, atomically, in one cache round trip.

DRF's SimpleRateThrottle keeps a list of request timestamps per client in the
cache: a get of the whole list, then a set of it. Parallel requests of one
client all read the same list, so a burst passes the limit unnoticed, and the
list grows with the rate (6,000 pickled floats per call for `mcp_events`).
Here a request is one INCR of a counter named after the client and the
current window, in one command to Redis (foundation.cache.counters_incr, a Lua script that also sets the
counter's expiry when the window's first request creates it): parallel
requests get distinct counts and exactly the allowed number pass. One command
rather than a pipelined INCR + EXPIRE: about half redis-py's CPU per count
(bench/intake).

Clients are counted per foundation.client_ip bucket (the address our trusted
proxies saw; an IPv6 client per /64). When the cache is unreachable the
throttle lets the request through and logs a warning: an outage of Redis must
not turn every public request into a 500.

A fixed window lets a client spend its allowance at the end of one window
and again at the start of the next; Retry-After is exact: the time left in
the window.
"""

import functools
import time

import structlog
from redis.exceptions import RedisError
from rest_framework.throttling import ScopedRateThrottle as DrfScopedRateThrottle
from rest_framework.throttling import SimpleRateThrottle

from foundation.cache import counters_incr
from foundation.client_ip import client_ip_bucket

logger = structlog.get_logger(__name__)


@functools.cache
def parse_rate(rate: str) -> tuple[int, int]:
    """DRF's "20/min" as (requests, seconds), parsed once per distinct rate rather than per request."""
    return SimpleRateThrottle.parse_rate(None, rate)


def window_wait(key: str, rate: str, *, now: float | None = None) -> float | None:
    """Count one request under `key` against `rate`: None if it is allowed, else the seconds left in the window.

    None as well when the cache cannot be reached (logged): see the module docstring."""
    return window_waits([key], rate, now=now)[0]


def window_waits(keys: list[str], rate: str, *, now: float | None = None) -> list[float | None]:
    """window_wait for each of `keys` (one request each), in one round trip to the cache on Redis."""
    limit, duration = parse_rate(rate)
    now = time.time() if now is None else now
    window = int(now // duration)
    try:
        # A window's counter expires `duration` after its first request: never before the window ends.
        counts = counters_incr([f"{key}:{window}" for key in keys], timeout=duration)
    except (RedisError, OSError) as exc:
        logger.warning("throttle_unavailable", error=type(exc).__name__)  # the key names the client: not logged
        return [None] * len(keys)
    return [None if count <= limit else (window + 1) * duration - now for count in counts]


class RateThrottle(SimpleRateThrottle):
    """SimpleRateThrottle's rates, scopes and keys; the count is a per-window counter (module docstring)."""

    def allow_request(self, request, view):
        if self.rate is None:
            return True
        self.key = self.get_cache_key(request, view)
        if self.key is None:
            return True
        self.wait_seconds = window_wait(self.key, self.rate, now=self.timer())
        return self.wait_seconds is None

    def parse_rate(self, rate):
        return (None, None) if rate is None else parse_rate(rate)

    def get_ident(self, request):
        return client_ip_bucket(request) or "unknown"

    def wait(self):
        return self.wait_seconds


class ScopedRateThrottle(DrfScopedRateThrottle, RateThrottle):
    """DRF's ScopedRateThrottle (rate per view's `throttle_scope`, per user or client IP), counted per window."""


class ClientIpRateThrottle(RateThrottle):
    """A rate per client IP bucket for the subclass's `scope`, whether the client is signed in or not."""

    def get_cache_key(self, request, view):
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}
