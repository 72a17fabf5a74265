"""/metrics across web processes: two config.serve processes (daphne, as deployed) share one
PROMETHEUS_MULTIPROC_DIR, and either one's /metrics counts the requests and open streams of both; a process
that exits takes its open streams out of the sum and leaves its counts in."""

import contextlib
import signal
import socket
import subprocess
import time

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from standins.v0 import V0, Behaviour
from tests.conftest import subprocess_env, web_process
from tests.prototypes.conftest import make_lead

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

TOKEN = "metrics-token-for-tests"
HEALTHZ = (("method", "GET"), ("route", "/healthz"), ("status", "200"))
STREAM_ROUTE = "/api/leads/<str:lead_id>/generate-stream"


@pytest.fixture
def v0():
    server = V0(Behaviour(stall_after=1)).start()  # the generation stalls: its stream stays open
    yield server
    server.stop()


@pytest.fixture
def web(tmp_path, v0):
    """Start a web process on a free port, all of them writing to one PROMETHEUS_MULTIPROC_DIR."""
    directory = tmp_path / "metrics"
    directory.mkdir()
    env = subprocess_env(
        PROMETHEUS_MULTIPROC_DIR=directory, METRICS_TOKEN=TOKEN, V0_API_URL=v0.url, V0_API_KEY=v0.behaviour.api_key,
        V0_STREAM_IDLE_SECONDS=30,
    )  # fmt: skip
    with contextlib.ExitStack() as started:

        def start() -> tuple[subprocess.Popen, int]:
            return started.enter_context(web_process(env))

        start.directory = directory
        yield start


def scrape(port: int) -> dict[tuple, float]:
    response = requests.get(f"http://127.0.0.1:{port}/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def open_streams(port: int) -> float:
    return scrape(port).get(("leadgen_http_streams_open", (("route", STREAM_ROUTE),)), 0)


def eventually(read, expected, timeout=10):
    deadline = time.monotonic() + timeout
    while (value := read()) != expected and time.monotonic() < deadline:
        time.sleep(0.1)
    return value


def test_either_process_counts_the_requests_and_streams_of_both(web):
    lead = make_lead()
    first, first_port = web()
    second, second_port = web()
    for port, times in ((first_port, 3), (second_port, 2)):
        for _ in range(times):
            assert requests.get(f"http://127.0.0.1:{port}/healthz").status_code == 200
    assert scrape(first_port)[("leadgen_http_requests_total", HEALTHZ)] == 5
    assert scrape(second_port)[("leadgen_http_requests_total", HEALTHZ)] == 5

    stream = socket.create_connection(("127.0.0.1", second_port), timeout=10)
    try:
        stream.sendall(f"GET /api/leads/{lead.public_id}/generate-stream HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
        assert stream.recv(65536).startswith(b"HTTP/1.1 200")
        assert eventually(lambda: open_streams(first_port), 1) == 1, "the other process's stream counts"

        live_gauge = web.directory / f"gauge_livesum_{second.pid}.db"
        assert live_gauge.exists()
        second.send_signal(signal.SIGTERM)  # as supervisord stops it
        second.wait(10)
        assert not live_gauge.exists(), "its live gauge went with it"
        assert open_streams(first_port) == 0
        assert scrape(first_port)[("leadgen_http_requests_total", HEALTHZ)] == 5, "its counts stay"
    finally:
        stream.close()
