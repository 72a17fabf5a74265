"""One Redis connection pool per process for Django's cache, and one shared client for direct commands.

Django keeps one cache object per thread, and its RedisCacheClient builds its
own ConnectionPool per cache object. Under daphne every request runs in a
fresh thread (sync views and middleware), so every request that touches the
cache (the throttles, the rate-limit buckets) would open a new TCP connection
to Redis, handshake included (bench/intake counts new connections per
request). CACHES' OPTIONS `pool_class` points here: `from_url` hands every
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
from django.core.cache import cache
from django.db import connection, transaction


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
    return _redis_client(config["LOCATION"], config.get("OPTIONS", {}).get("max_connections"))


@functools.lru_cache(maxsize=4)
def _redis_client(url: str, max_connections: int | None = None) -> redis.Redis:
    # The cache pool's connection limit (redis-py's default is 100).
    options = {"max_connections": max_connections} if max_connections else {}
    return redis.Redis(connection_pool=SharedConnectionPool.from_url(url, **options))


def counter_incr(key: str, *, timeout: int) -> int:
    """Count one more under `key` (expiring `timeout` seconds after the last count): the count so far,
    this one included. Atomic on every cache backend, across processes: throttles and circuit breakers.

    On Redis: one pipelined INCR + EXPIRE. Django's cache.incr elsewhere is a get then a set, so two
    processes can both read 4 and both write 5; on the database cache the row is locked for it (on
    SQLite the IMMEDIATE transaction of settings.py takes the write lock at its start).
    """
    return counters_incr([key], timeout=timeout)[0]


def counters_incr(keys: list[str], *, timeout: int) -> list[int]:
    """counter_incr for each of `keys`, in order; on Redis all in one pipelined round trip."""
    redis_client = shared_redis()
    if redis_client is not None:
        pipeline = redis_client.pipeline(transaction=False)
        for key in keys:
            pipeline.incr(cache.make_key(key))  # the cache's prefix and version, as for every other entry
            pipeline.expire(cache.make_key(key), timeout)
        return pipeline.execute()[::2]
    return [_counter_incr_without_redis(key, timeout) for key in keys]


def touch_many(keys: list[str], *, timeout: int) -> list[bool]:
    """cache.touch for each of `keys`, in order (whether each still existed); on Redis all in one
    pipelined round trip, where Django's cache makes one per key (the relays' leases, a thousand at once)."""
    redis_client = shared_redis()
    if redis_client is None:
        return [cache.touch(key, timeout) for key in keys]
    pipeline = redis_client.pipeline(transaction=False)
    for key in keys:
        pipeline.expire(cache.make_key(key), timeout)  # what RedisCache.touch sends
    return [bool(done) for done in pipeline.execute()]


def _counter_incr_without_redis(key: str, timeout: int) -> int:
    if settings.CACHES["default"]["BACKEND"] != "django.core.cache.backends.db.DatabaseCache":
        return _add_and_incr(key, timeout)  # in-process caches (tests) lock their own incr
    with transaction.atomic():
        cache.add(key, 0, timeout=timeout)
        if connection.vendor == "postgresql":
            table = connection.ops.quote_name(settings.CACHES["default"]["LOCATION"])
            with connection.cursor() as cursor:
                cursor.execute(f"SELECT 1 FROM {table} WHERE cache_key = %s FOR UPDATE", [cache.make_key(key)])
        return _add_and_incr(key, timeout)


def _add_and_incr(key: str, timeout: int) -> int:
    cache.add(key, 0, timeout=timeout)
    try:
        return cache.incr(key)
    except ValueError:  # expired between add and incr: this is the first count
        cache.set(key, 1, timeout=timeout)
        return 1
