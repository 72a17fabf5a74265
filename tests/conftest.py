import contextlib
import os
import random
import socket
import subprocess
import sys
import time
import uuid

import pytest
import requests
from django.conf import settings
from django.core.signals import request_finished, request_started
from django.db import close_old_connections

import tests.jobs.handlers  # noqa: F401  (registers the test job kinds)
from tests.browser import ensure_staff_groups
from tests.jobs.handlers import runs_store

pytest_plugins = ["tests.browser", "tests.scheduling"]


def pytest_configure(config):
    # Django's advice for test speed: production's hasher spends 0.2 s of CPU on each password by design, and
    # the suite makes and checks a few hundred. No test is about the hash itself.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def staff_groups(request, django_db_blocker):
    """The staff groups `migrate` made, there for every test that uses the database: a transactional test or a
    live server ends with a flush that takes them away, and which test ran before this one depends on how the
    files were shared out among `make test`'s workers."""
    marker = request.node.get_closest_marker("django_db")
    if marker is None and not {"db", "transactional_db", "live_server"} & set(request.fixturenames):
        return
    request.getfixturevalue("django_db_setup")
    with django_db_blocker.unblock():
        ensure_staff_groups()


@pytest.fixture
def runs():
    """A fresh Redis hash name in which test handlers count their runs, and a reader for it."""
    name = f"test:runs:{uuid.uuid4()}"
    store = runs_store()

    class Runs:
        key = name

        def counts(self):
            return {k: int(v) for k, v in store.hgetall(name).items()}

    yield Runs()
    store.delete(name)


@pytest.fixture
def empty_broker():
    """The broker's queue emptied of the run messages earlier tests left there with no worker to take them: a
    worker this test starts would work through them all first (a fresh child each under --max-tasks-per-child)."""
    from config.celery import app

    app.control.purge()


FIRST_PICKED_PORT = 10000


def free_port() -> int:
    """A loopback port free now, and likely still free when a server binds it, up to a minute later (`make run`
    migrates and loads its office first). So it is picked below the kernel's ephemeral range, where outgoing
    connections take their own ports, and each xdist worker picks in a slice of its own."""
    with open("/proc/sys/net/ipv4/ip_local_port_range") as ephemeral:
        below = int(ephemeral.read().split()[0])
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw"))
    size = (below - FIRST_PICKED_PORT) // workers
    first = FIRST_PICKED_PORT + worker * size
    for port in random.sample(range(first, first + size), 200):
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {first}–{first + size - 1}")


def minute_with_time_left(seconds: float = 15) -> None:
    """Rate limits and once-a-minute job keys count in windows that start on the clock's minute: a test whose
    calls must fall in one window waits, when the current one has less than `seconds` left, for the next to
    begin."""
    left = 60 - time.time() % 60
    if left < seconds:
        time.sleep(left)


def subprocess_env(**extra) -> dict:
    """Environment for a worker/beat subprocess that shares the test database."""
    db = settings.DATABASES["default"]
    env = dict(os.environ)
    env["DATABASE_URL"] = f"postgres://{db['USER']}:{db['PASSWORD'] or ''}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
    env.update({k: str(v) for k, v in extra.items()})
    return env


@pytest.fixture
def keep_the_test_transaction():
    """For calls straight to the WSGI app (schemathesis): like Django's test client, keep it from closing
    the test's database connection at the end of each request."""
    for signal in (request_started, request_finished):
        signal.disconnect(close_old_connections)
    yield
    for signal in (request_started, request_finished):
        signal.connect(close_old_connections)


def wait_until_up(url, process=None, timeout=60):
    """Wait for a server started by a test to answer at `url`, whatever the status (one on a database that is
    down answers 503): not merely to listen, as a fresh process's first answer can outlast a test's own timeout
    on a busy host. Stops waiting if `process` exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise AssertionError(f"the server of {url} exited with {process.returncode}")
        try:
            requests.get(url, timeout=10)
            return
        except requests.RequestException:
            time.sleep(0.2)
    raise AssertionError(f"{url} did not come up")


@contextlib.contextmanager
def web_process(env=None, *, server="config.serve", **popen):
    """A web process serving config.asgi on a free port (config.serve, as deployed; `server="daphne"` for plain
    daphne): (process, port) once it answers, stopped at the end. Readiness asks /readyz, so that a test counting
    its /healthz requests in the metrics counts only its own."""
    port = free_port()
    command = [sys.executable, "-m", server, "-b", "127.0.0.1", "-p", str(port), "config.asgi:application"]
    popen.setdefault("stdout", subprocess.DEVNULL)
    popen.setdefault("stderr", subprocess.DEVNULL)
    process = subprocess.Popen(command, env=subprocess_env() if env is None else env, **popen)
    try:
        wait_until_up(f"http://127.0.0.1:{port}/readyz", process)
        yield process, port
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
