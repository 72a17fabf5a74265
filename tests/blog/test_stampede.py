"""Concurrent misses on one key make one WordPress call: 100 clients at once against a real server."""

import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from blog import cache as posts_cache
from tests.conftest import free_port, subprocess_env, wait_until_up

CLIENTS = 100


def burst(urls, count: int = CLIENTS):
    """`count` GETs released at once, spread over `urls`."""
    urls = [urls] if isinstance(urls, str) else urls
    start = threading.Barrier(count)

    def one(number):
        start.wait()
        response = requests.get(urls[number % len(urls)], timeout=30)
        return response.status_code, response.headers.get("X-Cache"), response.content

    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(one, range(count)))


@pytest.mark.django_db(transaction=True)
def test_a_hundred_concurrent_misses_make_one_upstream_call(live_server, wordpress):
    wordpress.delay = 0.5  # WordPress is slow: every request arrives while the first is still fetching
    answers = burst(f"{live_server.url}/api/posts?per_page=5")
    assert wordpress.calls == 1
    assert {status for status, _, _ in answers} == {200}
    assert len({content for _, _, content in answers}) == 1
    outcomes = [outcome for _, outcome, _ in answers]
    assert outcomes.count("miss") == 1 and outcomes.count("hit") == CLIENTS - 1


@pytest.mark.django_db(transaction=True)
def test_a_hundred_concurrent_requests_to_a_down_wordpress_make_one_call(live_server, wordpress):
    wordpress.status, wordpress.delay = 503, 0.3
    started = time.monotonic()
    answers = burst(f"{live_server.url}/api/posts")
    # One call, then none for FAILURE_BACKOFF_SECONDS; a busy machine may spread the burst over a longer time.
    windows = 1 + int((time.monotonic() - started) // posts_cache.FAILURE_BACKOFF_SECONDS)
    assert 1 <= wordpress.calls <= windows
    assert {status for status, _, _ in answers} == {503}


@pytest.mark.django_db
def test_a_miss_that_takes_the_lock_after_a_failed_fetch_does_not_call_again():
    """Another request fails and lets go between this one's read and its lock: the failure mark holds it back."""
    calls = []

    def failing_fetch():
        calls.append(1)
        raise posts_cache.UpstreamFailed

    def another_request_fails_meanwhile():
        posts_cache.read_through("posts?page=9", failing_fetch)

    answer = posts_cache.read_through("posts?page=9", failing_fetch, admit=another_request_fails_meanwhile)
    assert len(calls) == 1
    assert answer.entry is None


@pytest.mark.slow
def test_two_daphne_processes_share_one_upstream_call(wordpress, tmp_path):
    """The lock and the entry live in the shared cache: misses in different processes wait for one fetch."""
    processes, bases = [], []
    env = subprocess_env(WORDPRESS_API_URL=wordpress.api_url, WORDPRESS_TIMEOUT_SECONDS=5, LOG_LEVEL="WARNING")
    try:
        for number in range(2):
            port = free_port()
            log = open(tmp_path / f"daphne{number}.log", "wb")  # noqa: SIM115 - closed with the process
            processes.append((subprocess.Popen([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                                                "config.asgi:application"], env=env, stdout=log, stderr=log), log))
            bases.append(f"http://127.0.0.1:{port}")
        for base in bases:
            wait_until_up(f"{base}/healthz")
        wordpress.delay = 0.5
        answers = burst([f"{base}/api/posts?page=2" for base in bases])
    finally:
        for process, log in processes:
            process.terminate()
            process.wait(timeout=20)
            log.close()
    assert wordpress.calls == 1
    assert {status for status, _, _ in answers} == {200}
    assert len({content for _, _, content in answers}) == 1
