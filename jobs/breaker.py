"""Circuit breakers whose state every worker process shares through Django's cache.

pybreaker's own Redis storage keeps its keys outside the cache's prefix and
without an expiry; ours keeps the state in the cache (its prefix, its
connection pool), each key expiring a week after its last write.
"""

from datetime import UTC, datetime

import pybreaker
from django.core.cache import cache

from foundation.cache import counter_incr

_STATE_TTL = 7 * 24 * 3600


class CacheCircuitStorage(pybreaker.CircuitBreakerStorage):
    def __init__(self, name: str):
        super().__init__(name)
        self._prefix = f"circuit:{name}:"

    def _key(self, part):
        return self._prefix + part

    def _incr(self, part):
        counter_incr(self._key(part), timeout=_STATE_TTL)

    @property
    def state(self):
        return cache.get(self._key("state"), pybreaker.STATE_CLOSED)

    @state.setter
    def state(self, state):
        cache.set(self._key("state"), state, _STATE_TTL)

    def increment_counter(self):
        self._incr("fail_counter")

    def reset_counter(self):
        cache.set(self._key("fail_counter"), 0, _STATE_TTL)

    def increment_success_counter(self):
        self._incr("success_counter")

    def reset_success_counter(self):
        cache.set(self._key("success_counter"), 0, _STATE_TTL)

    @property
    def counter(self):
        return cache.get(self._key("fail_counter"), 0)

    @property
    def success_counter(self):
        return cache.get(self._key("success_counter"), 0)

    @property
    def opened_at(self):
        timestamp = cache.get(self._key("opened_at"))
        return datetime.fromtimestamp(timestamp, UTC) if timestamp is not None else None

    @opened_at.setter
    def opened_at(self, value):
        cache.set(self._key("opened_at"), value.timestamp(), _STATE_TTL)


def circuit_breaker(name: str, *, fail_max: int, reset_timeout: float, exclude=()) -> pybreaker.CircuitBreaker:
    """A breaker named `name`; every process asking for the same name sees the same state."""
    return pybreaker.CircuitBreaker(
        fail_max=fail_max,
        reset_timeout=reset_timeout,
        exclude=list(exclude),
        state_storage=CacheCircuitStorage(name),
        name=name,
    )
