"""The per-window throttles (foundation/throttling.py) on the real Redis cache, and with Redis unreachable."""

import threading
from types import SimpleNamespace

import pytest
from django.core.cache import cache
from django.test import RequestFactory
from rest_framework.request import Request

from foundation.cache import shared_redis
from foundation.throttling import ScopedRateThrottle, window_wait, window_waits
from tests.conftest import free_port, minute_with_time_left


@pytest.fixture(autouse=True)
def rate(monkeypatch):
    monkeypatch.setitem(ScopedRateThrottle.THROTTLE_RATES, "tests", "5/min")
    minute_with_time_left()
    cache.clear()
    yield
    cache.clear()


VIEW = SimpleNamespace(throttle_scope="tests")


def attempt(ip="203.0.113.7", at=None):
    throttle = ScopedRateThrottle()
    if at is not None:
        throttle.timer = lambda: at
    request = Request(RequestFactory().post("/", REMOTE_ADDR=ip))
    return throttle.allow_request(request, VIEW), throttle


def test_a_burst_of_parallel_requests_lets_exactly_the_rate_through():
    start = threading.Barrier(20)
    allowed = []

    def client():
        start.wait()
        allowed.append(attempt(at=600.0)[0])

    threads = [threading.Thread(target=client) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert allowed.count(True) == 5 and allowed.count(False) == 15


def test_retry_after_is_the_time_left_in_the_window_and_then_the_client_passes_again():
    for _ in range(5):
        assert attempt(at=610.0)[0]
    allowed, throttle = attempt(at=645.0)
    assert not allowed and throttle.wait() == pytest.approx(15.0)
    assert attempt(at=660.0)[0], "a new minute, a new allowance"


def test_clients_are_counted_apart():
    for _ in range(5):
        attempt(ip="203.0.113.7", at=720.0)
    assert not attempt(ip="203.0.113.7", at=720.0)[0]
    assert attempt(ip="198.51.100.1", at=720.0)[0]


def test_an_unreachable_cache_lets_requests_through_and_says_so(settings, caplog):
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                                   "LOCATION": f"redis://127.0.0.1:{free_port()}/0"}}  # fmt: skip
    assert [attempt(at=840.0)[0] for _ in range(6)] == [True] * 6
    assert window_wait("chat:stream:ip:203.0.113.7", "1/min", now=840.0) is None
    assert "throttle_unavailable" in caplog.text and "203.0.113.7" not in caplog.text


def test_many_requests_are_counted_in_one_call_each_against_its_own_key():
    waits = window_waits(["tests:a", "tests:b", "tests:a", "tests:a"], "2/min", now=900.0)
    assert waits[:3] == [None, None, None] and waits[3] == pytest.approx(60.0)


def test_a_windows_counter_expires():
    window_waits(["tests:ttl"], "5/min", now=960.0)  # window 16: 960–1020 s
    window_waits(["tests:ttl"], "5/min", now=1010.0)
    assert 0 < shared_redis().ttl(cache.make_key("tests:ttl:16")) <= 60, "never kept for good"
