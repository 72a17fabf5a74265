"""One Redis connection pool per process for Django's cache, and one shared client for direct commands.

Django keeps one cache object per thread, and its RedisCacheClient builds its
own ConnectionPool per cache object. Under daphne every request runs in a
fresh thread (sync views and middleware), so every request that touched the
cache (DRF's throttle, the rate-limit buckets) opened a new TCP connection to
Redis, handshake included: bench/intake counted 1.0 new connection per intake
request. CACHES' OPTIONS `pool_class` points here: `from_url` hands every
cache object of the process the same pool for the same URL and options.

redis-py pools are thread-safe (connections are checked out under a lock and
each command holds its own connection) and fork-safe (a child process that
inherits a pool drops the parent's connections on first use), so Celery's
prefork workers get their own connections.
"""

import functools
import threading

import redis
from django.conf import settings


class SharedConnectionPool(redis.ConnectionPool):
    _shared: dict = {}
    _lock = threading.Lock()

    @classmethod
    def from_url(cls, url, **kwargs):
        key = (cls, url, tuple(sorted((name, repr(value)) for name, value in kwargs.items())))
        with cls._lock:
            pool = cls._shared.get(key)
            if pool is None:
                pool = cls._shared[key] = super().from_url(url, **kwargs)
            return pool


def shared_redis() -> redis.Redis | None:
    """A client on the cache's Redis, for what Django's cache API cannot do in one round trip (the
    throttles' counters); None when the cache is not Redis. One client per process: Django's cache
    builds a new Redis object, with its ~200 response callbacks, for every operation."""
    config = settings.CACHES["default"]
    if config["BACKEND"] != "django.core.cache.backends.redis.RedisCache":
        return None
    return _redis_client(config["LOCATION"])


@functools.lru_cache(maxsize=4)
def _redis_client(url: str) -> redis.Redis:
    return redis.Redis(connection_pool=SharedConnectionPool.from_url(url))
