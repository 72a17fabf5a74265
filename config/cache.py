"""One Redis connection pool per process for Django's cache.

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

import threading

import redis


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
