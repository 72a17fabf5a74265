"""Stop and restart the throwaway PostgreSQL and Redis that scripts/with-services started (outage scenarios).

with-services exports the servers' directory and ports; PostgreSQL runs as the
postgres user, so it is driven through `runuser … pg_ctl`. A restarted Redis
writes its pid where with-services looks for it on exit.
"""

import os
import subprocess
import time

import redis
from django.db import connections


def _dir() -> str:
    return os.environ["WITH_SERVICES_DIR"]


def available() -> bool:
    return "WITH_SERVICES_DIR" in os.environ


def postgres_stop() -> None:
    """A fast shutdown: every connection is cut at once. Not `immediate`: the throwaway server runs with
    synchronous_commit=off, so a crash would drop commits it had already acknowledged."""
    pg_ctl = os.path.join(os.environ["WITH_SERVICES_PG_BIN"], "pg_ctl")
    subprocess.run(
        ["runuser", "-u", "postgres", "--", pg_ctl, "-D", f"{_dir()}/pgdata", "-m", "fast", "-w", "stop"],
        check=True, capture_output=True,
    )  # fmt: skip


def postgres_start() -> None:
    pg_ctl = os.path.join(os.environ["WITH_SERVICES_PG_BIN"], "pg_ctl")
    options = (
        f"-p {os.environ['WITH_SERVICES_PG_PORT']} -k {_dir()}/pgsock -c listen_addresses=127.0.0.1"
        " -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
    )
    subprocess.run(
        ["runuser", "-u", "postgres", "--", pg_ctl, "-D", f"{_dir()}/pgdata", "-o", options,
         "-l", f"{_dir()}/pgdata/restarted.log", "-w", "-t", "60", "start"],
        check=True, capture_output=True,
    )  # fmt: skip
    # This process's connections died with the old server, pooled ones too.
    for connection in connections.all():
        connection.close()
        if getattr(connection, "pool", None) is not None:
            connection.close_pool()


def redis_stop() -> None:
    with open(f"{_dir()}/redis.pid") as pid_file:
        pid = int(pid_file.read().split()[0])
    os.kill(pid, 9)  # as a crash would: nothing saved (the throwaway server keeps no data on disk anyway)
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)


def redis_start() -> None:
    port = os.environ["WITH_SERVICES_REDIS_PORT"]
    process = subprocess.Popen(
        ["redis-server", "--port", port, "--bind", "127.0.0.1", "--dir", f"{_dir()}/redis", "--save", "",
         "--appendonly", "no", "--daemonize", "no", "--logfile", ""],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    with open(f"{_dir()}/redis.pid", "w") as pid_file:
        pid_file.write(f"{process.pid}\n")
    client = redis.Redis(host="127.0.0.1", port=int(port))
    for _ in range(200):
        try:
            if client.ping():
                return
        except redis.ConnectionError:
            time.sleep(0.05)
    raise RuntimeError("Redis did not come back")
