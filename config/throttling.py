"""DRF throttles that count requests per fixed window, atomically, in one cache round trip.

DRF's SimpleRateThrottle keeps a list of request timestamps per client in the
cache: a get of the whole list, then a set of it. Parallel requests of one
client all read the same list, so a burst passes the limit unnoticed, and the
list grows with the rate (6,000 pickled floats per call for `mcp_events`).
Here a request is one INCR of a counter named after the client and the
current window, with its expiry, in one pipelined round trip to Redis:
parallel requests get distinct counts and exactly the allowed number pass.
Without Redis (the zero-setup run's database cache) the counter is the
cache's add + incr.

A fixed window lets a client spend its allowance at the end of one window
and again at the start of the next; Retry-After is exact: the time left in
the window.
"""

from django.core.cache import cache
from rest_framework.throttling import ScopedRateThrottle as DrfScopedRateThrottle
from rest_framework.throttling import SimpleRateThrottle

from config.cache import shared_redis


def window_count(key: str, duration: int) -> int:
    """Count one more request under `key` (a key per window): the number counted so far, this one included."""
    redis = shared_redis()
    if redis is None:
        cache.add(key, 0, timeout=duration)
        try:
            return cache.incr(key)
        except ValueError:  # expired between add and incr: this is the window's first request
            cache.add(key, 1, timeout=duration)
            return 1
    key = cache.make_key(key)  # the cache's prefix and version, as for every other entry
    pipeline = redis.pipeline(transaction=False)
    pipeline.incr(key)
    pipeline.expire(key, duration)
    count, _ = pipeline.execute()
    return count


class RateThrottle(SimpleRateThrottle):
    """SimpleRateThrottle's rates, scopes and keys; the count is a per-window counter (module docstring)."""

    def allow_request(self, request, view):
        if self.rate is None:
            return True
        self.key = self.get_cache_key(request, view)
        if self.key is None:
            return True
        now = self.timer()
        window = int(now // self.duration)
        self.wait_seconds = (window + 1) * self.duration - now
        return window_count(f"{self.key}:{window}", self.duration) <= self.num_requests

    def wait(self):
        return self.wait_seconds


class ScopedRateThrottle(DrfScopedRateThrottle, RateThrottle):
    """DRF's ScopedRateThrottle (rate per view's `throttle_scope`, per user or client IP), counted per window."""
