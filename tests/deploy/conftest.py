"""The web processes as deploy/ runs them: supervisord from deploy/supervisor/web.conf, as the Procfile's `web`
starts it, with its daphne processes found by PID through /proc."""

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

import requests

from tests.conftest import free_port

PROJECT = Path(__file__).resolve().parents[2]
SUPERVISORD = [str(PROJECT / ".venv/bin/supervisord"), "-n", "-c", str(PROJECT / "deploy/supervisor/web.conf")]


def wait_for(condition, *, timeout: float, message: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(requests.ConnectionError, requests.Timeout):
            if result := condition():
                return result
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {message}")


def children(pid: int) -> list[int]:
    try:
        return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except FileNotFoundError:
        return []


def web_processes(supervisord: int) -> list[int]:
    """The daphne processes supervisord runs (not its event listener)."""
    found = []
    for pid in children(supervisord):
        with contextlib.suppress(FileNotFoundError):
            if b"config.serve" in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
    return sorted(found)


def alive(pid: int) -> bool:
    """Running, not a zombie waiting for its parent."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


class Launcher:
    def __init__(self, process: subprocess.Popen, port: int, log: Path):
        self.process, self.port, self.log = process, port, log
        self.base = f"http://127.0.0.1:{port}"

    def web_processes(self) -> list[int]:
        return web_processes(self.process.pid)

    def stop(self) -> list[int]:
        """SIGTERM to supervisord, as systemd and honcho stop it; the daphne processes it had."""
        had = self.web_processes()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=30)
        return had


@contextlib.contextmanager
def launcher(tmp_path: Path, env: dict, processes: int = 2):
    """supervisord with `processes` web processes on a free port, up once each answers /healthz."""
    port = free_port()
    env = {**env, "PORT": str(port), "BIND_HOST": "127.0.0.1", "WEB_PROCESSES": str(processes),
           "WEB_LOG_FILE": "/dev/fd/1", "WEB_LOG_SYSLOG": "false", "LOG_FORMAT": "json"}  # fmt: skip
    log = tmp_path / f"web-{port}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(SUPERVISORD, cwd=PROJECT, env=env, stdout=out, stderr=subprocess.STDOUT)
    running = Launcher(process, port, log)
    try:
        wait_for(lambda: len(running.web_processes()) == processes, timeout=30, message="the web processes")
        wait_for(lambda: requests.get(f"{running.base}/healthz", timeout=10).ok, timeout=60,
                 message=f"/healthz; the launcher wrote:\n{log.read_text()[-3000:]}")  # fmt: skip
        yield running
    finally:
        left = running.web_processes()
        with contextlib.suppress(subprocess.TimeoutExpired):
            running.stop()
        for pid in left + running.web_processes():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
