"""The Redis cache shares one connection pool per process instead of one per request thread."""

import threading

import redis
from django.conf import settings
from django.core.cache import caches


def in_new_thread(fn):
    result = {}
    thread = threading.Thread(target=lambda: result.setdefault("value", fn()))
    thread.start()
    thread.join()
    return result["value"]


def test_every_thread_uses_the_same_pool():
    def pool():
        caches["default"].get("pool-probe")  # Django builds its per-thread cache object and client here
        return caches["default"]._cache._get_connection_pool(write=True)

    pools = {id(in_new_thread(pool)) for _ in range(5)}
    assert len(pools) == 1


def test_a_request_thread_does_not_open_a_new_redis_connection():
    server = redis.Redis.from_url(settings.REDIS_URL)
    caches["default"].set("warm", 1)  # the pool's first connection

    def use_cache(n):
        cache = caches["default"]
        cache.set(f"thread-{n}", n, 30)
        return cache.get(f"thread-{n}")

    before = server.info("stats")["total_connections_received"]
    assert [in_new_thread(lambda n=n: use_cache(n)) for n in range(20)] == list(range(20))
    opened = server.info("stats")["total_connections_received"] - before
    assert opened <= 1, f"{opened} new connections for 20 threads"


def test_concurrent_threads_share_the_pool_safely():
    errors, barrier = [], threading.Barrier(16)

    def worker(n):
        try:
            cache = caches["default"]
            barrier.wait()
            for i in range(50):
                cache.set(f"c-{n}-{i}", (n, i), 30)
                assert cache.get(f"c-{n}-{i}") == (n, i)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


def test_touch_many_extends_the_entries_that_exist():
    from django.core.cache import cache

    from foundation.cache import touch_many

    cache.set("lease-a", 1, 5)
    cache.set("lease-b", 2, 5)
    server = redis.Redis.from_url(settings.REDIS_URL)

    def expires():
        return server.info("commandstats").get("cmdstat_expire", {}).get("calls", 0)

    before = expires()
    assert touch_many(["lease-a", "gone", "lease-b"], timeout=600) == [True, False, True]
    assert expires() - before == 3
    assert 5 < server.ttl(cache.make_key("lease-a")) <= 600 and cache.get("lease-b") == 2
