"""What the benchmark scripts share: checks, the processes they start, and where the CPU went.

Each `bench/<name>/run.py` puts the project root on `sys.path` and sets
DJANGO_SETTINGS_MODULE itself (it runs as a script), then imports this module;
the functions that need Django import it when called, after `django.setup()`.
Importing a script starts nothing and reads no arguments: its `main()` does,
run by `run()` under `if __name__ == "__main__"`.

- `run()`: a script's `main()`, its result the exit status, a `BenchError` exit status 2.
- `percentile()`: a quantile of sorted figures.

- `check_services()`: REDIS_URL and CELERY_BROKER_URL are Redis URLs, as `scripts/with-services` sets them.
- `start_process()` / `stop_process()`: a server or worker in its own session
  (so it and its children form one process group), output to a log file in the
  bench's `out/`, stopped with SIGTERM then SIGKILL for the whole group.
- `free_port()` / `wait_http()`: a port for a server to start on, and waiting until it answers there.
- `start_nginx()`: nginx in the foreground with the site of deploy/nginx/leadgen.conf in front of a web socket
  (configured by `standins.nginx`, as the deploy tests configure it).
- `celery_worker_command()`: the worker every bench runs, quiet and alone.
- `CpuMeter`: CPU seconds per part (this process, each started process group,
  PostgreSQL, Redis) read from /proc, and the rest of the machine, which on a
  shared VM is other tenants' load; `per_unit()` turns two samples into
  microseconds per operation.
- `machine_info()`: the facts every results file records.
"""

import contextlib
import os
import platform
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

from standins import nginx

ROOT = Path(__file__).resolve().parents[1]


class BenchError(Exception):
    """The bench cannot run or a check failed: the scripts exit with status 2."""


def run(main, name):
    """What every script does under `if __name__ == "__main__"`: `main()`'s return value is the exit status
    (None is 0), a BenchError is printed and exits with status 2."""
    try:
        sys.exit(main())
    except BenchError as exc:
        print(f"bench/{name}: {exc}", file=sys.stderr)
        sys.exit(2)


def percentile(sorted_values, q):
    """The `q` quantile (0..1) of values sorted ascending, interpolated linearly; None for none."""
    if not sorted_values:
        return None
    k = (len(sorted_values) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (k - lo)


def check_services():
    for name in ("REDIS_URL", "CELERY_BROKER_URL"):
        if not os.environ.get(name, "").startswith("redis://"):
            raise BenchError(f"{name} is not a Redis URL: run under scripts/with-services")


def redis_client(url=None):
    import redis

    return redis.Redis.from_url(url or os.environ["REDIS_URL"])


# --- processes ------------------------------------------------------------------------------------


def start_process(name, command, *, env, out_dir):
    """Start `command` in its own session (pgid == pid), its output in `out_dir/<name>.log`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    log_path = out_dir / f"{name}.log"
    log = open(log_path, "wb")  # noqa: SIM115 - closed with the process
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True)  # fmt: skip
    process.log_file, process.log_path, process.name = log, log_path, name
    return process


def stop_process(process, *, timeout=20):
    """SIGTERM to the process group (a warm shutdown), SIGKILL if it is not gone within `timeout`."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
    process.log_file.close()


def log_tail(process, lines=30):
    try:
        return "\n".join(process.log_path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def check_alive(process):
    if process.poll() is not None:
        raise BenchError(f"{process.name} exited with {process.returncode}:\n{log_tail(process)}")


def free_port() -> int:
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """`count` distinct free ports (all held open at once while they are picked)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def wait_http(process, url, timeout=60.0, *, status=None):
    """Until the server `process` started answers `url` (any HTTP status counts, or only `status` when given);
    BenchError if it exits first or does not answer within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        check_alive(process)
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if status in (None, response.status):
                    return
        except urllib.error.HTTPError as error:
            if status is None:
                return  # it answers
            error.close()
        except OSError:
            pass
        time.sleep(0.2)
    raise BenchError(f"{process.name} did not answer at {url} within {timeout}s:\n{log_tail(process)}")


def start_nginx(name, *, web, out_dir, worker_connections=4096):
    """nginx in the foreground with the site deploy/render.py renders for the web socket `web` (HOST:PORT), on
    a free port, in a prefix of its own under `out_dir` (standins.nginx); (process, URL)."""
    port = free_port()
    command = nginx.configure(out_dir / name, port=port, web=web, worker_connections=worker_connections)
    return start_process(name, command, env=dict(os.environ), out_dir=out_dir), f"http://127.0.0.1:{port}"


# What the Procfile gives worker processes: one kept database connection each, no pool (settings.py).
WORKER_ENV = {"DATABASE_POOL": "false"}


def celery_worker_command(*, concurrency, name, include=()):
    """One prefork worker; no heartbeat, gossip or mingle, which only add traffic to a one-worker bench."""
    command = [
        sys.executable, "-m", "celery", "-A", "config", "worker", "-P", "prefork", "-c", str(concurrency),
        "-n", f"{name}-{uuid.uuid4().hex[:8]}@%h", "--without-heartbeat", "--without-gossip", "--without-mingle",
        "--loglevel", "WARNING",
    ]  # fmt: skip
    if include:
        command += ["--include", ",".join(include)]
    return command


# --- CPU accounting: where the machine's CPUs went during a phase -----------------------------------

TICK = os.sysconf("SC_CLK_TCK")


def proc_stat(pid):
    """(ppid, pgrp, own CPU seconds, reaped children's CPU seconds), or None when the process is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()
    utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
    return int(fields[1]), int(fields[2]), (utime + stime) / TICK, (cutime + cstime) / TICK


def postmaster_pid():
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SHOW data_directory")
        data_dir = Path(cursor.fetchone()[0])
    try:
        return int((data_dir / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError):
        return None


class CpuMeter:
    """CPU seconds of this process, of process groups started by the bench, of PostgreSQL and Redis.

    `groups` maps a part's name to the pids of the group leaders it covers
    (processes started with `start_process`, so their children count too);
    it may be changed between phases. The machine's busy time minus all of
    ours is the rest of the machine: on a shared VM, other tenants.
    """

    def __init__(self, *, own="bench", groups: dict[str, Iterable[int]] | None = None):
        self.own = own
        self.groups = {part: list(leaders) for part, leaders in (groups or {}).items()}
        self.postmaster = postmaster_pid()
        self.redis_pid = int(redis_client().info("server")["process_id"])

    @property
    def parts(self):
        return (self.own, *self.groups, "postgres", "redis")

    def sample(self):
        times = os.times()
        out = dict.fromkeys(self.parts, 0.0)
        out[self.own] = times.user + times.system
        leaders = {pid: part for part, pids in self.groups.items() for pid in pids}
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            pid = int(name)
            stat = proc_stat(pid)
            if stat is None:
                continue
            ppid, pgrp, own, children = stat
            if pgrp in leaders:
                # Exited children of the leader (a worker's recycled processes) are in its children time.
                out[leaders[pgrp]] += own + (children if pid == pgrp else 0.0)
            elif pid == self.postmaster:
                out["postgres"] += own + children  # exited backends end up in the postmaster's children time
            elif ppid == self.postmaster:
                out["postgres"] += own
            elif pid == self.redis_pid:
                out["redis"] += own
        cpu = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) / TICK for x in cpu[:8])
        out["machine_busy"] = user + nice + system + irq + softirq
        out["steal"] = steal
        out["wall"] = time.monotonic()
        return out

    def per_unit(self, before, after, count):
        """Microseconds of CPU per unit (job, email, request) for each part, between two samples.

        `total_ours` sums the parts, `other_processes` is the rest of the
        machine; `<group>_cores` and `other_cores` are cores used on average.
        """
        delta = {key: after[key] - before[key] for key in after}
        parts = [part for part in self.parts if part in delta]
        n = max(count, 1)
        ours = sum(delta[part] for part in parts)
        others = max(delta["machine_busy"] - ours, 0.0)
        result = {part: round(delta[part] / n * 1e6) for part in parts}
        result["total_ours"] = round(ours / n * 1e6)
        result["other_processes"] = round(others / n * 1e6)
        result["steal"] = round(delta["steal"] / n * 1e6)
        wall = delta["wall"] or 1e-9
        for part in self.groups:
            result[f"{part}_cores"] = round(delta[part] / wall, 2)
        result["other_cores"] = round(others / wall, 2)
        result["machine_utilisation"] = round(delta["machine_busy"] / (wall * os.cpu_count()), 3)
        return result


# --- the facts every results file records -------------------------------------------------------------


def machine_info(**extra):
    import django
    import psycopg
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        pg_version = cursor.fetchone()[0]
    cpu = ""
    with contextlib.suppress(OSError):
        cpu = next(
            (line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
             if line.startswith("model name")), "",
        )  # fmt: skip
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "nproc": len(os.sched_getaffinity(0)),
        "cpu": cpu,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "django": django.get_version(),
        "psycopg": psycopg.__version__,
        "postgres": pg_version,
        "redis": redis_client().info("server")["redis_version"],
        "loadavg_at_start": os.getloadavg(),
        **extra,
    }
