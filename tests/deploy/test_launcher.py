"""The web launcher (deploy/supervisor/web.conf, the Procfile's `web`): several daphne processes on one socket
held by supervisord, each replaced when it dies, the body limits of config.serve in each, all stopped by
SIGTERM; a launcher whose processes cannot start stops instead of serving nothing."""

import os
import signal
import subprocess
import time

import pytest
import requests

from tests.conftest import free_port
from tests.deploy.conftest import PROJECT, SUPERVISORD, alive, launcher, wait_for

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def web(tmp_path_factory):
    with launcher(tmp_path_factory.mktemp("launcher"), dict(os.environ)) as running:
        yield running


def served(base: str) -> bool:
    """One request on a connection of its own."""
    return requests.get(f"{base}/healthz", headers={"Connection": "close"}, timeout=10).status_code == 200


def test_each_process_serves_from_the_one_socket_and_one_that_dies_is_replaced(web):
    first, second = web.web_processes()
    # With one process stopped, the other accepts every connection on the shared socket; and the other way round.
    for stopped in (first, second):
        os.kill(stopped, signal.SIGSTOP)
        try:
            assert all(served(web.base) for _ in range(5)), f"the process other than {stopped} did not serve"
        finally:
            os.kill(stopped, signal.SIGCONT)

    os.kill(first, signal.SIGKILL)
    assert all(served(web.base) for _ in range(20)), "requests failed while a process was down"

    def replacement():
        pids = web.web_processes()
        return next((pid for pid in pids if pid not in (first, second)), None) if len(pids) == 2 else None

    new = wait_for(replacement, timeout=30, message="supervisord to start a replacement")
    assert web.web_processes() == sorted([second, new])
    os.kill(second, signal.SIGSTOP)
    try:
        wait_for(lambda: served(web.base), timeout=30, message="the replacement to serve")
    finally:
        os.kill(second, signal.SIGCONT)
    assert alive(new)


def test_a_body_over_the_routes_limit_is_refused_by_the_web_process(web):
    response = requests.post(f"{web.base}/api/leads", data=b"x" * (64 * 1024 + 1),
                             headers={"Content-Type": "application/json"}, timeout=10)  # fmt: skip
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "too_large"


def test_sigterm_stops_supervisord_and_every_web_process(tmp_path):
    with launcher(tmp_path, dict(os.environ)) as running:
        started = time.monotonic()
        had = running.stop()
        assert len(had) == 2 and running.process.returncode == 0
        assert time.monotonic() - started < 15, "supervisord took too long to stop its processes"
        assert not [pid for pid in had if alive(pid)], "a web process outlived supervisord"
        with pytest.raises(requests.ConnectionError):
            requests.get(f"{running.base}/healthz", timeout=2)


def test_a_launcher_whose_processes_cannot_start_exits(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}  # settings refuse to load
    env.update(PORT=str(free_port()), BIND_HOST="127.0.0.1", WEB_PROCESSES="2")
    env.update(WEB_LOG_FILE="/dev/fd/1", WEB_LOG_SYSLOG="false")
    result = subprocess.run(SUPERVISORD, cwd=PROJECT, env=env, capture_output=True, text=True, timeout=60)
    assert "DATABASE_URL is required" in result.stdout
    assert "entered FATAL state" in result.stdout and "received SIGTERM" in result.stdout
