"""What bench/intake and bench/sources share: a group of daphne processes serving the project (or a variant
of it), the closed loop of clients posting the web form's body to them, and what is sampled around it
(daphne's threads, PostgreSQL's connections, the shared servers' counters). The scripts configure Django
before importing this module.
"""

import asyncio
import json
import os
import statistics
import sys
import threading
import urllib.request
from pathlib import Path

import aiohttp
import psycopg
import redis

from bench.common import BenchError, check_alive, free_port, start_process, stop_process, wait_http

BIN = Path(sys.executable).parent


def daphne_overrides(items):
    """NAME=VALUE items (--daphne-env, --variant-env) as a dict."""
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            raise BenchError(f"--daphne-env expects NAME=VALUE, got {item!r}")
        out[name] = value
    return out


def form_body(tag, n) -> bytes:
    """The web form's body for `POST /api/leads`; the email, `<tag>-<n>@bench.example.com`, tells the leads apart."""
    return json.dumps({
        "firstName": "Ada",
        "lastName": "Lovelace",
        "email": f"{tag}-{n}@bench.example.com",
        "phone": "+1 415 555 2671",
        "company": "Analytical Engines Ltd",
        "message": "We would like help automating our invoicing and reporting; about 40 people use the current tool.",
        "serviceType": "dedicated_team",  # not prototype-eligible: no per-email/IP hold
        "sourcePage": "https://example.com/services/dedicated-team",
        "utm": {"source": "google", "medium": "cpc", "campaign": "bench"},
        "steps": {"team_size": "5-10", "timeline": "this quarter", "stack": ["python", "react"]},
    }).encode()  # fmt: skip


def form_request(tag, n) -> tuple[bytes, dict]:
    """`form_body` with its headers, as `load` builds requests."""
    return form_body(tag, n), {"Content-Type": "application/json"}


def http_json(method, url, body=None):
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


class Server:
    """A group of daphne processes serving the bench: the project as configured, or the variant (`root`: a
    copy of the project whose code it serves)."""

    def __init__(self, name, procs, env, *, out_dir, root=None):
        self.name, self.env, self.out_dir, self.root = name, env, out_dir, root
        self.ports = [free_port() for _ in range(procs)]
        self.urls = [f"http://127.0.0.1:{port}" for port in self.ports]
        self.processes = []

    def start(self):
        for i, port in enumerate(self.ports):
            command = [str(BIN / "daphne"), "-b", "127.0.0.1", "-p", str(port), "config.asgi:application"]
            if self.root:  # daphne puts its working directory first on sys.path: the variant's code is imported
                command = ["env", "-C", str(self.root), *command]
            name = f"daphne-{self.name}{i}"
            self.processes.append(start_process(name, command, env=self.env, out_dir=self.out_dir))
        for process, url in zip(self.processes, self.urls, strict=True):
            wait_http(process, f"{url}/healthz", status=200)

    def check_alive(self):
        for process in self.processes:
            check_alive(process)

    def stop(self):
        for process in self.processes:
            stop_process(process, timeout=10)

    @property
    def pids(self):
        return [p.pid for p in self.processes]


class Sampler(threading.Thread):
    """Every 100 ms: daphne's threads and PostgreSQL's client connections (all, and not idle)."""

    def __init__(self, daphne_pids):
        super().__init__(daemon=True)
        self.daphne_pids = daphne_pids
        self.stop_event = threading.Event()
        self.threads, self.connections, self.active = [], [], []

    def run(self):
        with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as conn:
            me = conn.info.backend_pid
            while not self.stop_event.wait(0.1):
                threads = 0
                for pid in self.daphne_pids:
                    try:
                        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                            if line.startswith("Threads:"):
                                threads += int(line.split()[1])
                    except OSError:
                        pass
                self.threads.append(threads)
                row = conn.execute(
                    "SELECT count(*), count(*) FILTER (WHERE state <> 'idle') FROM pg_stat_activity"
                    " WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> %s",
                    [me],
                ).fetchone()
                self.connections.append(row[0] - 1)  # this process's own Django connection
                self.active.append(row[1])

    def stop(self):
        self.stop_event.set()
        self.join(timeout=5)
        return {
            "daphne_threads_max": max(self.threads, default=0),
            "pg_connections_max": max(self.connections, default=0),
            "pg_busy_max": max(self.active, default=0),
            "pg_busy_median": statistics.median(self.active) if self.active else 0,
            "sampler_queries": len(self.connections),
        }


def server_counters():
    """Totals of the shared servers: statements and commands made, connections opened (new ones tell churn
    from reuse)."""
    info = redis.Redis.from_url(os.environ["REDIS_URL"]).info("stats")
    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        sessions, commits, rollbacks = conn.execute(
            "SELECT sessions, xact_commit, xact_rollback FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
    return {
        "redis_connections": info["total_connections_received"],
        "redis_commands": info["total_commands_processed"],
        "pg_sessions": sessions,
        "pg_transactions": commits + rollbacks,
    }


async def load(urls, build, *, concurrency, warmup, duration, tag, on_window_start, on_window_end):
    """Closed loop: `concurrency` clients post back to back (client i to urls[i % len]) until the window ends;
    `build(tag, n)` gives the n-th request's body and headers."""
    loop = asyncio.get_running_loop()
    records = []  # (started, ended, status, error)
    counter = iter(range(10**9))
    start = loop.time()
    measure_from, measure_to = start + warmup, start + warmup + duration
    window = {}

    async def client(session, url):
        while loop.time() < measure_to:
            body, headers = build(tag, next(counter))
            began = loop.time()
            status, error = 0, ""
            try:
                async with session.post(url, data=body, headers=headers) as response:
                    await response.read()
                    status = response.status
                    if status != 200:
                        error = f"HTTP {status}"
            except Exception as exc:  # noqa: BLE001 - every failure counts as an error
                error = type(exc).__name__
            records.append((began, loop.time(), status, error))

    async def timekeeper():
        await asyncio.sleep(max(measure_from - loop.time(), 0))
        window["start"] = on_window_start()
        await asyncio.sleep(max(measure_to - loop.time(), 0))
        window["end"] = on_window_end()

    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=60)) as session:
        await asyncio.gather(timekeeper(), *(client(session, urls[i % len(urls)]) for i in range(concurrency)))
    return records, measure_from, measure_to, window
