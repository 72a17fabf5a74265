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


def shared_redis() -> redis.Redis:
    """A client on the cache's Redis, for what Django's cache API cannot do in one round trip (the
    throttles' counters). One client per process: Django's cache builds a new Redis object, with its
    ~200 response callbacks, for every operation."""
    config = settings.CACHES["default"]
    return _redis_client(config["LOCATION"], config.get("OPTIONS", {}).get("max_connections"))


@functools.lru_cache(maxsize=4)
def _redis_client(url: str, max_connections: int | None = None) -> redis.Redis:
    # The cache pool's connection limit (redis-py's default is 100).
    options = {"max_connections": max_connections} if max_connections else {}
    return redis.Redis(connection_pool=SharedConnectionPool.from_url(url, **options))


# INCR each key, and give a counter its expiry when its first count creates it. Returns the counts, in order.
_COUNT_SCRIPT = """
local counts = {}
for i, key in ipairs(KEYS) do
  counts[i] = redis.call('INCR', key)
  if counts[i] == 1 then redis.call('EXPIRE', key, ARGV[1]) end
end
return counts
"""


def counter_incr(key: str, *, timeout: int) -> int:
    """Count one more under `key` (expiring `timeout` seconds after its first count): the count so far,
    this one included. Atomic across processes (throttles and circuit breakers), where Django's
    cache.incr is a get then a set, so two processes could both read 4 and both write 5.
    """
    return counters_incr([key], timeout=timeout)[0]


def counters_incr(keys: list[str], *, timeout: int) -> list[int]:
    """counter_incr for each of `keys`, in order, in one command (a Lua script sent as EVALSHA): about half
    redis-py's CPU of a pipelined INCR + EXPIRE per key (bench/intake)."""
    counters = [cache.make_key(key) for key in keys]  # the cache's prefix and version, as for every other entry
    return _count_script(shared_redis())(keys=counters, args=[timeout])


@functools.lru_cache(maxsize=4)
def _count_script(client):
    """_COUNT_SCRIPT on `client`, loaded again when Redis lacks it (after a restart)."""
    return client.register_script(_COUNT_SCRIPT)


def touch_many(keys: list[str], *, timeout: int) -> list[bool]:
    """cache.touch for each of `keys`, in order (whether each still existed), all in one pipelined round
    trip, where Django's cache makes one per key (the relays' leases, a thousand at once)."""
    pipeline = shared_redis().pipeline(transaction=False)
    for key in keys:
        pipeline.expire(cache.make_key(key), timeout)  # what RedisCache.touch sends
    return [bool(done) for done in pipeline.execute()]
