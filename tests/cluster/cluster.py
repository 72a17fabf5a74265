"""The product as it runs in production, on one machine: a host per process type in a private network.

    db        PostgreSQL 15 (as the postgres user)      web1, web2   the web launcher (deploy/supervisor/web.conf)
    redis     Redis                                     worker1, 2   a Celery worker each (Procfile's `worker`)
    standins  every outside service (standins_host)     beat         Celery beat (Procfile's `beat`)
    proxy     nginx with deploy/nginx/leadgen.conf, in front of web1 and web2

Each host is a network namespace (tests/cluster/netns.py); the visitors are this process, on addresses of
the bridge. The hosts get the settings a deployment gives them: the database and Redis at their hosts'
addresses, TRUSTED_PROXY_COUNT=1 behind nginx, the stand-ins' settings, short job leases and sweeps so that
a dead worker's jobs are reclaimed within seconds. `Cluster.stop()` stops everything, even after a failure.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import requests

from tests.cluster.netns import Network

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PG_BIN = Path(os.environ.get("PG_BIN", "/usr/lib/postgresql/15/bin"))
HOSTS = {"db": 2, "redis": 3, "standins": 4, "proxy": 10, "web1": 11, "web2": 12, "worker1": 21, "worker2": 22,
         "beat": 30}  # fmt: skip
VISITORS = range(40, 251)  # the visitors' own addresses: one per prototype lead at a time, as the holds want
WEB_PORT, RECORDS_PORT = 8000, 9000
WEB_PROCESSES = 2  # daphne processes per web host


@dataclass(frozen=True)
class Timings:
    lease_seconds: int  # JOBS_LEASE_SECONDS: a dead worker's job is reclaimed after it
    v0_parts: int  # a generation's part frames
    v0_interval: float  # seconds between them
    v0_finish_after: float  # a generation ends by then, whether its stream is read or not


def missing_requirements() -> str | None:
    """Why this machine cannot run the cluster, or None."""
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    for tool in ("ip", "nginx", "redis-server", "runuser"):
        if shutil.which(tool) is None and not Path(f"/usr/sbin/{tool}").exists():
            return f"{tool} is not installed"
    if not (PG_BIN / "postgres").exists():
        return f"PostgreSQL 15 not found in {PG_BIN}"
    if subprocess.run(["ip", "netns", "list"], capture_output=True).returncode:
        return "ip netns does not work here"
    return None


class Cluster:
    def __init__(self, timings: Timings, logs: Path):
        self.timings = timings
        self.net = Network(HOSTS, visitors=VISITORS)
        self.logs = logs
        self.work: Path | None = None
        self.env: dict[str, str] = {}

    # --- addresses ---------------------------------------------------------------------------
    def addr(self, host: str) -> str:
        return self.net.address(host)

    @property
    def url(self) -> str:
        """The site, as visitors reach it: nginx."""
        return f"http://{self.addr('proxy')}"

    @property
    def database_url(self) -> str:
        return f"postgres://postgres@{self.addr('db')}:5432/leadgen"

    @property
    def records_url(self) -> str:
        return f"http://{self.addr('standins')}:{RECORDS_PORT}/records.json"

    def web_upstream(self, host: str) -> str:
        return f"{self.addr(host)}:{WEB_PORT}"

    # --- lifecycle -----------------------------------------------------------------------------
    def start(self) -> "Cluster":
        shutil.rmtree(self.logs, ignore_errors=True)
        self.logs.mkdir(parents=True)
        self.net.up()
        # Under /tmp, named after the owner: the postgres user reaches it, and leftovers are found by name.
        self.work = Path(tempfile.mkdtemp(prefix=f"cluster-{self.net.owner}-", dir="/tmp"))
        self.work.chmod(0o755)
        self._start_postgres()
        self._start_redis()
        standins_env = self._start_standins()
        self._wait_postgres()
        self.env = self._product_env(standins_env)
        for command in (["migrate", "--noinput"], ["sync_schedules"]):
            self._manage(*command)
        for host in ("worker1", "worker2"):
            self._start_worker(host)
        self._start_beat()
        webs = {host: self._start_web(host) for host in ("web1", "web2")}
        proxy = self._start_proxy()
        for host, process in webs.items():
            self._wait_http(f"http://{self.web_upstream(host)}/healthz", host, process)
        self._wait_http(f"{self.url}/healthz", "proxy", proxy)
        self._wait_workers()
        return self

    def stop(self) -> None:
        self.net.down()

    def state(self) -> dict:
        """The database's end state (tests/cluster/state.py), read from here through the bridge."""
        done = subprocess.run(
            [sys.executable, "-m", "tests.cluster.state"], env=self.env, cwd=ROOT, capture_output=True, text=True,
            timeout=300,
        )  # fmt: skip
        if done.returncode:
            raise RuntimeError(f"tests.cluster.state failed: {done.stderr[-3000:]}")
        return json.loads(done.stdout)

    def records(self) -> dict:
        return requests.get(self.records_url, timeout=60).json()

    # --- the servers ---------------------------------------------------------------------------
    def _log(self, name: str) -> Path:
        return self.logs / f"{name}.log"

    def _start_postgres(self) -> None:
        data = self.work / "pgdata"
        socket_dir = self.work / "pgsock"
        for directory in (data, socket_dir):
            directory.mkdir()
            shutil.chown(directory, "postgres")
        data.chmod(0o700)
        subprocess.run(
            ["runuser", "-u", "postgres", "--", PG_BIN / "initdb", "-D", data, "-U", "postgres", "--auth=trust",
             "--encoding=UTF8", "--locale=C.UTF-8", "--no-sync"],
            check=True, capture_output=True,
        )  # fmt: skip
        with (data / "pg_hba.conf").open("a") as hba:
            hba.write(f"host all all {self.net.subnet}.0/24 trust\n")
        # Thrown away at the end: no fsync. Commits stay synchronous: acknowledged means written.
        self.net.spawn(
            "db",
            ["runuser", "-u", "postgres", "--", str(PG_BIN / "postgres"), "-D", str(data), "-p", "5432",
             "-k", str(socket_dir), "-c", f"listen_addresses={self.addr('db')}", "-c", "fsync=off",
             "-c", "full_page_writes=off", "-c", "max_connections=300"],
            env=_base_env(), log=self._log("db-postgres"),
        )  # fmt: skip

    def _wait_postgres(self) -> None:
        deadline = time.monotonic() + 60
        ready = [PG_BIN / "pg_isready", "-q", "-h", self.addr("db"), "-p", "5432", "-U", "postgres"]
        while subprocess.run(ready).returncode:
            if time.monotonic() > deadline:
                raise RuntimeError(f"PostgreSQL did not start: {self._log('db-postgres').read_text()[-2000:]}")
            time.sleep(0.2)
        subprocess.run([PG_BIN / "createdb", "-h", self.addr("db"), "-U", "postgres", "leadgen"], check=True)

    def _start_redis(self) -> None:
        self.net.spawn(
            "redis",
            ["redis-server", "--port", "6379", "--bind", self.addr("redis"), "--save", "", "--appendonly", "no",
             "--protected-mode", "no", "--daemonize", "no", "--logfile", ""],
            env=_base_env(), log=self._log("redis"),
        )  # fmt: skip

    def _start_standins(self) -> dict[str, str]:
        env_file = self.work / "standins.env"
        t = self.timings
        process = self.net.spawn(
            "standins",
            [sys.executable, "-m", "tests.cluster.standins_host", "--host", self.addr("standins"),
             "--env-file", str(env_file), "--records-port", str(RECORDS_PORT), "--v0-parts", str(t.v0_parts),
             "--v0-interval", str(t.v0_interval), "--v0-finish-after", str(t.v0_finish_after)],
            env=_base_env(), log=self._log("standins"), cwd=ROOT,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while not env_file.exists():
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the stand-ins did not start: {self._log('standins').read_text()[-2000:]}")
            time.sleep(0.1)
        return dict(line.split("=", 1) for line in env_file.read_text().splitlines())

    def _product_env(self, standins_env: dict[str, str]) -> dict[str, str]:
        redis = f"redis://{self.addr('redis')}:6379"
        hosts = [self.addr(host) for host in ("proxy", "web1", "web2")]
        lease = self.timings.lease_seconds
        return {
            **_base_env(),
            **standins_env,
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "DATABASE_URL": self.database_url,
            "REDIS_URL": f"{redis}/0",
            "CELERY_BROKER_URL": f"{redis}/1",
            "SECRET_KEY": "cluster-" + "k3y-0f-th3-cl4st3r-t3st-n0t-us3d-3ls3wh3r3-" * 2,
            "ALLOWED_HOSTS": ",".join(hosts),
            "SITE_URL": self.url,
            "TRUSTED_PROXY_COUNT": "1",
            # Plain HTTP inside the private network: the production checks that want HTTPS are accepted.
            "SILENCED_SYSTEM_CHECKS": "security.E102,security.E103,security.E104",
            "DATA_DIR": str(self.work),
            "LOG_LEVEL": "WARNING",
            "LOG_FORMAT": "json",
            "CONFIRMATION_EMAIL_DELAY": "1",
            "JOBS_LEASE_SECONDS": str(lease),
            "JOBS_SWEEP_SECONDS": "2",
            "JOBS_BACKOFF_BASE_SECONDS": "0.5",
            "JOBS_BACKOFF_MAX_SECONDS": "5",
            "PROTOTYPES_CHECK_SECONDS": "5",
            "HTTP_READ_TIMEOUT": "5",
        }

    def _manage(self, *args: str) -> None:
        done = subprocess.run([sys.executable, "manage.py", *args], env=self.env, cwd=ROOT, capture_output=True)
        if done.returncode:
            raise RuntimeError(f"manage.py {' '.join(args)} failed: {done.stderr.decode()[-3000:]}")

    def _start_web(self, host: str) -> subprocess.Popen:
        """The web launcher as production runs it (deploy/supervisor/web.conf, the Procfile's `web`): supervisord
        holding the socket for WEB_PROCESSES daphne processes."""
        env = {**self.env, "PORT": str(WEB_PORT), "BIND_HOST": self.addr(host), "WEB_PROCESSES": str(WEB_PROCESSES),
               "WEB_LOG_FILE": "/dev/fd/1", "WEB_LOG_SYSLOG": "false"}  # fmt: skip
        return self.net.spawn(
            host, [str(BIN / "supervisord"), "-n", "-c", str(ROOT / "deploy" / "supervisor" / "web.conf")],
            env=env, log=self._log(f"{host}-web"), cwd=ROOT,
        )  # fmt: skip

    def _start_proxy(self) -> subprocess.Popen:
        """nginx with the site of deploy/nginx/leadgen.conf, rendered by deploy/render.py for the proxy host."""
        prefix = self.work / "nginx"
        subprocess.run(
            [sys.executable, str(ROOT / "deploy" / "render.py"), str(prefix), "--server-name", self.addr("proxy"),
             "--listen", f"{self.addr('proxy')}:80", "--web", self.web_upstream("web1"),
             "--static-root", str(self.work / "static")],
            check=True, capture_output=True, cwd=ROOT,
        )  # fmt: skip
        site = prefix / "nginx" / "leadgen.conf"
        site.write_text(cluster_site(site.read_text(), [self.web_upstream(host) for host in ("web1", "web2")]))
        config = prefix / "nginx.conf"
        config.write_text(NGINX_MAIN.format(prefix=prefix, site=site))
        return self.net.spawn(
            "proxy", ["nginx", "-p", str(prefix), "-c", str(config), "-g", "daemon off;"],
            env=_base_env(), log=self._log("proxy-nginx"),
        )  # fmt: skip

    def _start_worker(self, host: str) -> None:
        """The Procfile's `worker` line, named after its host (the hosts share one host name), logging warnings
        only (INFO is a line per task)."""
        self.net.spawn(
            host,
            [str(BIN / "celery"), "-A", "config", "worker", "--loglevel=WARNING", "--concurrency=2",
             "-n", f"{host}@cluster"],
            env={**self.env, "DATABASE_POOL": "false"}, log=self._log(f"{host}-worker"), cwd=ROOT,
        )  # fmt: skip

    def _wait_workers(self) -> None:
        """Until both workers answer a ping: a host killed before it took any work would prove nothing. (A
        command of its own, with the hosts' settings: Celery prefers CELERY_BROKER_URL from the environment
        to the broker an app in this process is given.)"""
        names = ",".join(f"{host}@cluster" for host in ("worker1", "worker2"))
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            done = subprocess.run(
                [str(BIN / "celery"), "-A", "config", "inspect", "ping", "-d", names, "--timeout", "2", "--json"],
                env=self.env, cwd=ROOT, capture_output=True, text=True,
            )  # fmt: skip
            if done.returncode == 0 and done.stdout.count("pong") == 2:
                return
        raise RuntimeError(f"the workers did not answer: {self._log('worker1-worker').read_text()[-2000:]}")

    def _start_beat(self) -> None:
        """The Procfile's `beat` line."""
        self.net.spawn(
            "beat",
            [str(BIN / "celery"), "-A", "config", "beat", "--loglevel=WARNING",
             "--scheduler", "django_celery_beat.schedulers:DatabaseScheduler", "--pidfile="],
            env={**self.env, "DATABASE_POOL": "false"}, log=self._log("beat"), cwd=ROOT,
        )  # fmt: skip

    def _wait_http(self, url: str, name: str, process: subprocess.Popen, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and process.poll() is None:
            try:
                if requests.get(url, timeout=2).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.2)
        tails = {log.name: log.read_text()[-1500:] for log in self.logs.glob("*.log")}
        raise RuntimeError(f"{name} did not answer {url}: {tails}")


def _base_env() -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "HOME": os.environ.get("HOME", "/root")}


# The main configuration around the site, as Debian's nginx.conf wraps sites-enabled/, with its paths in the
# working directory and its errors in the proxy host's log.
NGINX_MAIN = """
worker_processes 1;
pid {prefix}/nginx.pid;
error_log stderr warn;
events {{ worker_connections 8192; }}
http {{
  include /etc/nginx/mime.types;
  access_log off;
  client_body_temp_path {prefix}/body;
  proxy_temp_path {prefix}/proxy;
  fastcgi_temp_path {prefix}/fastcgi;
  uwsgi_temp_path {prefix}/uwsgi;
  scgi_temp_path {prefix}/scgi;
  include {site};
}}
"""


def cluster_site(site: str, upstreams: list[str]) -> str:
    """The rendered site with every web host in its upstream (the template names one address), and the web
    host that answered in X-Upstream, for the test to see which one served a stream."""
    first = f"server {upstreams[0]};"
    assert first in site, "deploy/nginx/leadgen.conf's upstream is no longer `server ${WEB_ADDRESS};`"
    site = site.replace(first, "\n    ".join(f"server {upstream};" for upstream in upstreams), 1)
    return site.replace("server_tokens off;", "server_tokens off;\n    add_header X-Upstream $upstream_addr always;", 1)
