"""`make run` smoke test: the zero-setup system starts, is ready, and runs a job end to end.

Runs the real command with no DATABASE_URL, REDIS_URL or CELERY_BROKER_URL,
as a new user would: SQLite, the filesystem broker, honcho with daphne, a
Celery worker and beat.
"""

import os
import re
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
import requests

from tests.conftest import free_port

pytestmark = pytest.mark.slow

PROJECT = Path(__file__).resolve().parent.parent


def wait_for(condition, *, timeout, message):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if result := condition():
                return result
        except (requests.ConnectionError, sqlite3.OperationalError):
            pass
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {message}")


@pytest.fixture
def running_system(tmp_path):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL"}}
    env.update(DATA_DIR=str(tmp_path / "data"), CELERY_CONCURRENCY="1")
    output = tmp_path / "make-run.log"
    with output.open("w") as log:
        process = subprocess.Popen(
            ["make", "--no-print-directory", "run", f"PORT={port}"],
            cwd=PROJECT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        yield process, base, output, tmp_path / "data" / "db.sqlite3"
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def test_make_run_starts_everything_and_runs_a_job(running_system):
    process, base, output, database = running_system

    ready = wait_for(
        lambda: requests.get(f"{base}/readyz", headers={"Accept": "application/json"}, timeout=5),
        timeout=240,
        message="/readyz to answer",
    )
    assert ready.status_code == 200, ready.text
    assert ready.json() == {"status": "ok"}, "anonymous callers get the status alone"
    # The MCP server's own process (Procfile `mcp`, honcho's PORT + 300); with no Auth0 API set it says so.
    host, _, port = base.rpartition(":")
    mcp_url = f"{host}:{int(port) + 300}/mcp"
    assert "not configured" in wait_for(lambda: requests.post(mcp_url, timeout=5).text, timeout=60, message="/mcp")
    assert requests.post(mcp_url, timeout=5).status_code == 404
    printed = output.read_text()
    assert "demo / demo-password" in printed
    assert f"{base}/admin/" in printed

    # Through the web process, as an operator: log in and press "Send test job".
    browser = requests.Session()
    browser.get(f"{base}/admin/login/", timeout=10)
    login = browser.post(
        f"{base}/admin/login/?next=/admin/",
        data={"username": "demo", "password": "demo-password", "csrfmiddlewaretoken": browser.cookies["csrftoken"]},
        timeout=10,
    )
    assert login.url.endswith("/admin/"), "login failed"
    sent = browser.post(
        f"{base}/admin/jobs/job/send-test-job/",
        data={"csrfmiddlewaretoken": browser.cookies["csrftoken"]},
        timeout=10,
    )
    job_id = int(re.search(r"/admin/jobs/job/(\d+)/change/", sent.url).group(1))

    def job_status():
        with sqlite3.connect(database) as db:
            return db.execute("SELECT status FROM jobs_job WHERE id = ?", [job_id]).fetchone()[0] == "succeeded"

    wait_for(job_status, timeout=60, message="the worker to run the test job")
    printed = output.read_text()
    for name in ("web", "worker", "beat"):
        assert f"{name}.1 started" in printed, f"{name} did not start"
    # One JSON line per request (no terminal here): no request_started line, no daphne access line.
    login_page = [line for line in printed.splitlines() if "GET /admin/login/" in line]
    assert len(login_page) == 1 and '"event": "request_finished"' in login_page[0], login_page
    assert "jobs.sweep" in printed, "beat sends the sweep"

    # Ctrl-C stops all three processes.
    os.killpg(process.pid, signal.SIGINT)
    process.wait(timeout=30)
    time.sleep(1)
    with pytest.raises(ProcessLookupError):
        os.killpg(process.pid, 0)
