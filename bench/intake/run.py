"""POST /api/leads against a bare validate-and-insert endpoint, on daphne + PostgreSQL, in one run.

    scripts/with-services .venv/bin/python bench/intake/run.py [--rounds 2] [--duration 8]

One daphne process serves both endpoints (bench/intake/settings.py adds the
bare one); a fake OpenAI-compatible server (bench/intake/fake_llm.py) is the
classifier upstream. Phases alternate between the two endpoints:

  scenario 1: upstream answers at once, --c1 (32) concurrent clients, intake vs bare:
              target intake rate >= --target-ratio (0.6) x bare rate;
  scenario 2: upstream takes --slow-ms (300 ms), --c2 (100) concurrent clients:
              target intake >= --target-rate (100) leads/s with zero errors (bare as reference).

After every phase the Lead rows (and for intake: LLM-classified rows, Job rows,
upstream calls) are checked against the 200s counted by the client. See
bench/intake/README.md. Exit status: 0 targets met, 1 a target missed,
2 a check failed (rows missing or extra) or the bench could not run.
"""

import argparse
import asyncio
import json
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Run as a script, Python puts bench/intake/ first on the path; the project root is what we want.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(ROOT))
os.chdir(ROOT)
os.environ["DJANGO_SETTINGS_MODULE"] = "bench.intake.settings"
os.environ.setdefault("LOG_LEVEL", "WARNING")

OUT_DIR = ROOT / "bench" / "intake" / "out"  # git-ignored: daphne and fake LLM logs
RESULTS = ROOT / "bench" / "intake" / "results.json"
BIN = Path(sys.executable).parent
INTAKE_PATH = "/api/leads"
BARE_PATH = "/bench/bare-leads"
JOBS_PER_LEAD = 3  # lead_alert, pipedrive_sync, confirmation_email (leadgen.services.lead_fan_out)


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2, help="rounds per scenario; the order alternates (default 2)")
    parser.add_argument("--duration", type=float, default=8.0, help="measured seconds per phase (default 8)")
    parser.add_argument("--warmup", type=float, default=2.0, help="unmeasured seconds before each phase (default 2)")
    parser.add_argument("--c1", type=int, default=32, help="concurrent clients, scenario 1 (default 32)")
    parser.add_argument("--c2", type=int, default=100, help="concurrent clients, scenario 2 (default 100)")
    parser.add_argument("--slow-ms", type=float, default=300.0, help="upstream delay in scenario 2 (default 300)")
    parser.add_argument("--target-ratio", type=float, default=0.6, help="scenario 1 target (default 0.6)")
    parser.add_argument("--target-rate", type=float, default=100.0, help="scenario 2 target, leads/s (default 100)")
    parser.add_argument("--scenarios", default="1,2", help="which scenarios to run (default 1,2)")
    parser.add_argument("--daphne-procs", type=int, default=1,
                        help="daphne processes, each on its own port; clients are spread over them like a load "
                             "balancer would (default 1)")  # fmt: skip
    parser.add_argument("--experiments", default="",
                        help="comma-separated bench/intake/experiments.py names, for daphne and the in-process "
                             "profile (default none)")  # fmt: skip
    parser.add_argument("--profile-count", type=int, default=100,
                        help="requests per endpoint for the in-process CPU breakdown after the load (0: skip)")
    parser.add_argument("--py-spy", action="store_true",
                        help="record each measured window of the first daphne with py-spy (if installed) to out/")
    parser.add_argument(
        "--daphne-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="extra environment for daphne, e.g. DATABASE_POOL_MAX_SIZE=5 or ASGI_THREADS=4 (repeatable)",
    )
    parser.add_argument("--results", type=Path, default=RESULTS, help=f"JSON output (default {RESULTS.relative_to(ROOT)})")
    return parser.parse_args()


ARGS = parse_args()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


FAKE_PORT = free_port()
FAKE_URL = f"http://127.0.0.1:{FAKE_PORT}"
# The daphne processes and this one (migrations, row checks, in-process profile) see the same configuration.
BENCH_ENV = {
    "DJANGO_SETTINGS_MODULE": "bench.intake.settings",
    "PYTHONPATH": str(ROOT),
    "LLM_BASE_URL": f"{FAKE_URL}/v1",
    "LLM_API_KEY": "bench-key",
    "LLM_MODEL": "bench-model",
    "RECAPTCHA_SECRET_KEY": "",  # reCAPTCHA off (unconfigured), as with DEBUG or the trusted chat client
    # Throttling on, as in production, but never refusing. A one-second window: every request comes from
    # 127.0.0.1, and DRF keeps one timestamp per request of the window in the cached history (at 30/min
    # a real visitor's history holds at most 30).
    "LEADS_THROTTLE_RATE": "1000000/s",
    "LOG_LEVEL": "WARNING",
    "DEBUG": "false",
    "BENCH_EXPERIMENTS": ARGS.experiments,
}
os.environ.update(BENCH_ENV)

import django  # noqa: E402

django.setup()

import aiohttp  # noqa: E402
import psycopg  # noqa: E402
import redis  # noqa: E402
from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402

from jobs.models import Job  # noqa: E402
from leadgen.models import Lead  # noqa: E402


class BenchError(Exception):
    pass


def check_environment():
    if connection.vendor != "postgresql":
        raise BenchError("DATABASE_URL is not PostgreSQL: run under scripts/with-services")
    for name in ("REDIS_URL", "CELERY_BROKER_URL"):
        if not os.environ.get(name, "").startswith("redis://"):
            raise BenchError(f"{name} is not a Redis URL: run under scripts/with-services")


def machine_info(daphne_env):
    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        pg_version = cursor.fetchone()[0]
        cursor.execute("SHOW max_connections")
        pg_max_connections = int(cursor.fetchone()[0])
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import asgiref
    import daphne
    import openai
    import rest_framework

    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "nproc": len(os.sched_getaffinity(0)),
        "cpu": cpu,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "django": django.get_version(),
        "djangorestframework": rest_framework.VERSION,
        "daphne": daphne.__version__,
        "asgiref": asgiref.__version__,
        "openai": openai.__version__,
        "psycopg": psycopg.__version__,
        "aiohttp": aiohttp.__version__,
        "postgres": pg_version,
        "postgres_max_connections": pg_max_connections,
        "redis": redis.Redis.from_url(os.environ["REDIS_URL"]).info("server")["redis_version"],
        "server": "1 daphne process (sync DRF views in a thread per request)",
        "daphne_env_overrides": {k: v for k, v in daphne_env.items() if k in dict(_overrides())},
        "database_pool": settings.DATABASES["default"].get("OPTIONS", {}).get("pool"),
    }


def _overrides():
    out = []
    for item in ARGS.daphne_env:
        name, sep, value = item.partition("=")
        if not sep:
            raise BenchError(f"--daphne-env expects NAME=VALUE, got {item!r}")
        out.append((name, value))
    return out


# --- processes -------------------------------------------------------------------------------


def start_process(name, command, env):
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    log_path = OUT_DIR / f"{name}.log"
    log = open(log_path, "wb")  # noqa: SIM115 - closed with the process
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True)  # fmt: skip
    process.log_file, process.log_path, process.name = log, log_path, name
    return process


def stop_process(process):
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
    process.log_file.close()


def log_tail(process, lines=30):
    try:
        return "\n".join(process.log_path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def wait_http(process, url, timeout=60.0):
    import urllib.error
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise BenchError(f"{process.name} exited with {process.returncode}:\n{log_tail(process)}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.1)
    raise BenchError(f"{process.name} not answering {url} after {timeout}s:\n{log_tail(process)}")


def http_json(method, url, body=None):
    import urllib.request

    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


# --- CPU accounting: where the machine's two CPUs went during a phase --------------------------

TICK = os.sysconf("SC_CLK_TCK")


def _proc_stat(pid):
    """(ppid, utime+stime, cutime+cstime) in seconds, or None when the process is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()
    utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
    return int(fields[1]), (utime + stime) / TICK, (cutime + cstime) / TICK


class CpuMeter:
    """CPU seconds of the load generator (this process), daphne, PostgreSQL, Redis, the fake LLM."""

    def __init__(self, daphne, fake):
        self.daphne, self.fake = daphne.pid, fake.pid
        with connection.cursor() as cursor:
            cursor.execute("SHOW data_directory")
            data_dir = Path(cursor.fetchone()[0])
        try:
            self.postmaster = int((data_dir / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError):
            self.postmaster = None
        self.redis_pid = int(redis.Redis.from_url(os.environ["REDIS_URL"]).info("server")["process_id"])

    def sample(self):
        times = os.times()
        out = {"loadgen": times.user + times.system, "daphne": 0.0, "postgres": 0.0, "redis": 0.0, "fake_llm": 0.0}
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            pid = int(name)
            st = _proc_stat(pid)
            if st is None:
                continue
            ppid, own, children = st
            if pid == self.daphne:
                out["daphne"] += own
            elif pid == self.fake:
                out["fake_llm"] += own
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

    @staticmethod
    def per_request(before, after, count):
        """Microseconds of CPU per measured request for each part; `other` is the rest of the machine."""
        delta = {k: after[k] - before[k] for k in after}
        parts = ("loadgen", "daphne", "postgres", "redis", "fake_llm")
        ours = sum(delta[k] for k in parts)
        n = max(count, 1)
        result = {k: round(delta[k] / n * 1e6) for k in parts}
        result["total_ours"] = round(ours / n * 1e6)
        result["other_processes"] = round(max(delta["machine_busy"] - ours, 0.0) / n * 1e6)
        result["daphne_cores"] = round(delta["daphne"] / delta["wall"], 2)
        result["machine_utilisation"] = round(delta["machine_busy"] / (delta["wall"] * os.cpu_count()), 3)
        return result


class Sampler(threading.Thread):
    """Every 100 ms: daphne's thread count and PostgreSQL's client connections (all / active)."""

    def __init__(self, daphne_pid):
        super().__init__(daemon=True)
        self.daphne_pid = daphne_pid
        self.stop_event = threading.Event()
        self.threads, self.connections, self.active = [], [], []

    def run(self):
        with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as conn:
            me = conn.info.backend_pid
            while not self.stop_event.wait(0.1):
                try:
                    for line in Path(f"/proc/{self.daphne_pid}/status").read_text().splitlines():
                        if line.startswith("Threads:"):
                            self.threads.append(int(line.split()[1]))
                except OSError:
                    pass
                row = conn.execute(
                    "SELECT count(*), count(*) FILTER (WHERE state <> 'idle') FROM pg_stat_activity"
                    " WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> %s",
                    [me],
                ).fetchone()
                self.connections.append(row[0])
                self.active.append(row[1])

    def stop(self):
        self.stop_event.set()
        self.join(timeout=5)
        return {
            "daphne_threads_max": max(self.threads, default=0),
            "pg_connections_max": max(self.connections, default=0),
            "pg_connections_median": statistics.median(self.connections) if self.connections else 0,
            "pg_active_max": max(self.active, default=0),
        }


# --- the load generator --------------------------------------------------------------------------


def payload(tag: str, n: int) -> bytes:
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


def percentile(sorted_values, q):
    if not sorted_values:
        return None
    k = (len(sorted_values) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (k - lo)


async def load(url, *, concurrency, warmup, duration, tag, meter):
    """Closed loop: `concurrency` clients post back to back; returns every request and the window's CPU."""
    loop = asyncio.get_running_loop()
    records = []  # (started, ended, status, error)
    counter = iter(range(10**9))
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=60)
    headers = {"Content-Type": "application/json"}
    start = loop.time()
    measure_from, measure_to = start + warmup, start + warmup + duration
    cpu = {}

    async def client(session):
        while loop.time() < measure_to:
            body = payload(tag, next(counter))
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

    async def cpu_window():
        await asyncio.sleep(max(measure_from - loop.time(), 0))
        cpu["before"] = meter.sample()
        await asyncio.sleep(max(measure_to - loop.time(), 0))
        cpu["after"] = meter.sample()

    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        await asyncio.gather(cpu_window(), *(client(session) for _ in range(concurrency)))
    return records, measure_from, measure_to, cpu


def run_phase(base_url, fake_url, *, scenario, round_no, endpoint, concurrency, meter, daphne_pid):
    tag = f"s{scenario}r{round_no}-{endpoint}"
    path = INTAKE_PATH if endpoint == "intake" else BARE_PATH
    jobs_before = Job.objects.count()
    http_json("POST", f"{fake_url}/_stats/reset")
    sampler = Sampler(daphne_pid)
    sampler.start()
    records, t0, t1, cpu = asyncio.run(
        load(base_url + path, concurrency=concurrency, warmup=ARGS.warmup, duration=ARGS.duration, tag=tag,
             meter=meter)
    )  # fmt: skip
    samples = sampler.stop()
    upstream = http_json("GET", f"{fake_url}/_stats")

    window = [r for r in records if t0 <= r[1] < t1]
    latencies = sorted((r[1] - r[0]) * 1000 for r in window if r[2] == 200)
    ok_total = sum(1 for r in records if r[2] == 200)
    errors = [r[3] for r in records if r[2] != 200]
    error_kinds = {}
    for e in errors:
        error_kinds[e] = error_kinds.get(e, 0) + 1

    rows = Lead.objects.filter(email__startswith=f"{tag}-")
    check = {"requests": len(records), "ok": ok_total, "lead_rows": rows.count()}
    if endpoint == "intake":
        check["llm_classified_rows"] = rows.filter(classified_by=Lead.Classifier.LLM).count()
        check["job_rows"] = Job.objects.count() - jobs_before
        check["upstream_calls"] = upstream["requests"]
        check["passed"] = (
            check["lead_rows"] == ok_total
            and check["llm_classified_rows"] == ok_total
            and check["job_rows"] == JOBS_PER_LEAD * ok_total
        )
    else:
        check["passed"] = check["lead_rows"] == ok_total
    return {
        "scenario": scenario,
        "round": round_no,
        "endpoint": endpoint,
        "concurrency": concurrency,
        "upstream_delay_ms": upstream["delay_ms"],
        "measured_seconds": t1 - t0,
        "measured_ok": len(latencies),
        "rate": len(latencies) / (t1 - t0),
        "p50_ms": percentile(latencies, 0.50),
        "p90_ms": percentile(latencies, 0.90),
        "p99_ms": percentile(latencies, 0.99),
        "max_ms": latencies[-1] if latencies else None,
        "errors": len(errors),
        "error_kinds": error_kinds,
        "upstream_max_inflight": upstream["max_inflight"] if endpoint == "intake" else None,
        "cpu_us_per_request": CpuMeter.per_request(cpu["before"], cpu["after"], len(window)),
        "samples": samples,
        "check": check,
    }


def print_phase(p):
    cpu = p["cpu_us_per_request"]
    print(f"  s{p['scenario']} r{p['round']} {p['endpoint']:<6} c={p['concurrency']:<3} "
          f"{p['rate']:7.1f} req/s  p50 {p['p50_ms'] or 0:7.1f} ms  p99 {p['p99_ms'] or 0:7.1f} ms  "
          f"errors {p['errors']}  rows {'ok' if p['check']['passed'] else 'MISMATCH'}  "
          f"daphne {cpu['daphne']} us/req ({cpu['daphne_cores']} cores), machine {cpu['machine_utilisation']:.0%}",
          flush=True)  # fmt: skip


def warm_up(base_url):
    """Imports, URL resolution, the DB pool and the upstream connection: before anything is measured."""
    for endpoint, path in (("bare", BARE_PATH), ("intake", INTAKE_PATH)):
        async def go(url=base_url + path, tag=f"warm-{endpoint}"):
            async with aiohttp.ClientSession() as session:
                for n in range(50):
                    async with session.post(url, data=payload(tag, n), headers={"Content-Type": "application/json"}) as r:
                        await r.read()
                        if r.status != 200:
                            raise BenchError(f"warm-up {url}: HTTP {r.status}: {(await r.text())[:500]}")
        asyncio.run(go())


def main():
    check_environment()
    print("migrating the fresh database ...", flush=True)
    t = time.monotonic()
    call_command("migrate", verbosity=0, interactive=False)
    print(f"  done in {time.monotonic() - t:.1f}s", flush=True)

    fake_port, daphne_port = free_port(), free_port()
    fake_url = f"http://127.0.0.1:{fake_port}"
    base_url = f"http://127.0.0.1:{daphne_port}"
    env = dict(os.environ)
    env.update({
        "DJANGO_SETTINGS_MODULE": "bench.intake.settings",
        "PYTHONPATH": str(ROOT),
        "LLM_BASE_URL": f"{fake_url}/v1",
        "LLM_API_KEY": "bench-key",
        "LLM_MODEL": "bench-model",
        "RECAPTCHA_SECRET_KEY": "",
        "LEADS_THROTTLE_RATE": "1000000/min",
        "LOG_LEVEL": "WARNING",
        "DEBUG": "false",
    })  # fmt: skip
    env.update(dict(_overrides()))
    info = machine_info(env)
    print(f"machine: {info['nproc']} CPUs ({info['cpu']}), PostgreSQL {info['postgres']}, "
          f"pool {info['database_pool']}, daphne env overrides {info['daphne_env_overrides'] or 'none'}")  # fmt: skip

    fake = start_process("fake_llm", [sys.executable, "bench/intake/fake_llm.py", "--port", str(fake_port)], env)
    daphne = None
    phases, failed_check = [], False
    try:
        wait_http(fake, f"{fake_url}/_stats")
        daphne = start_process(
            "daphne", [str(BIN / "daphne"), "-b", "127.0.0.1", "-p", str(daphne_port), "config.asgi:application"], env
        )
        wait_http(daphne, f"{base_url}/healthz")
        warm_up(base_url)
        meter = CpuMeter(daphne, fake)
        print(f"daphne (pid {daphne.pid}, port {daphne_port}) and fake LLM (pid {fake.pid}) up and warm", flush=True)

        scenarios = [int(s) for s in ARGS.scenarios.split(",") if s.strip()]
        for scenario in scenarios:
            delay = 0.0 if scenario == 1 else ARGS.slow_ms
            concurrency = ARGS.c1 if scenario == 1 else ARGS.c2
            http_json("POST", f"{fake_url}/_control", {"delay_ms": delay})
            print(f"scenario {scenario}: upstream delay {delay:.0f} ms, {concurrency} clients, "
                  f"{ARGS.warmup:g}+{ARGS.duration:g} s per phase", flush=True)  # fmt: skip
            for round_no in range(1, ARGS.rounds + 1):
                order = ["bare", "intake"] if round_no % 2 else ["intake", "bare"]
                for endpoint in order:
                    phase = run_phase(base_url, fake_url, scenario=scenario, round_no=round_no, endpoint=endpoint,
                                      concurrency=concurrency, meter=meter, daphne_pid=daphne.pid)  # fmt: skip
                    phases.append(phase)
                    failed_check |= not phase["check"]["passed"]
                    print_phase(phase)
                    if daphne.poll() is not None:
                        raise BenchError(f"daphne exited with {daphne.returncode}:\n{log_tail(daphne)}")
                    time.sleep(1)  # let PostgreSQL's background writes settle
    finally:
        if daphne is not None:
            stop_process(daphne)
        stop_process(fake)

    summary = summarise(phases)
    print_table(phases, summary)
    ARGS.results.parent.mkdir(parents=True, exist_ok=True)
    ARGS.results.write_text(json.dumps({
        "machine": info,
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(ARGS).items()},
        "phases": phases,
        "summary": summary,
    }, indent=2, default=str) + "\n")  # fmt: skip
    shown = ARGS.results.relative_to(ROOT) if ARGS.results.is_relative_to(ROOT) else ARGS.results
    print(f"\nwrote {shown}")
    if failed_check:
        print("FAILED: Lead/Job rows do not match the 200s counted by the client (see check in results)", file=sys.stderr)
        return 2
    return 0 if all(s.get("met", True) for s in summary.values()) else 1


def _median(phases, scenario, endpoint, key):
    values = [p[key] for p in phases if p["scenario"] == scenario and p["endpoint"] == endpoint and p[key] is not None]
    return statistics.median(values) if values else None


def summarise(phases):
    summary = {}
    if any(p["scenario"] == 1 for p in phases):
        bare, intake = _median(phases, 1, "bare", "rate"), _median(phases, 1, "intake", "rate")
        ratio = intake / bare if bare else 0.0
        summary["scenario1"] = {
            "bare_rate": bare,
            "intake_rate": intake,
            "bare_p50_ms": _median(phases, 1, "bare", "p50_ms"),
            "bare_p99_ms": _median(phases, 1, "bare", "p99_ms"),
            "intake_p50_ms": _median(phases, 1, "intake", "p50_ms"),
            "intake_p99_ms": _median(phases, 1, "intake", "p99_ms"),
            "ratio": ratio,
            "target": ARGS.target_ratio,
            "met": ratio >= ARGS.target_ratio,
        }
    if any(p["scenario"] == 2 for p in phases):
        intake_phases = [p for p in phases if p["scenario"] == 2 and p["endpoint"] == "intake"]
        worst = min(p["rate"] for p in intake_phases)
        errors = sum(p["errors"] for p in intake_phases)
        summary["scenario2"] = {
            "intake_rate_min": worst,
            "intake_rate_median": _median(phases, 2, "intake", "rate"),
            "intake_p50_ms": _median(phases, 2, "intake", "p50_ms"),
            "intake_p99_ms": _median(phases, 2, "intake", "p99_ms"),
            "intake_errors": errors,
            "bare_rate": _median(phases, 2, "bare", "rate"),
            "bare_p50_ms": _median(phases, 2, "bare", "p50_ms"),
            "bare_p99_ms": _median(phases, 2, "bare", "p99_ms"),
            "upstream_max_inflight": max(p["upstream_max_inflight"] for p in intake_phases),
            "target_rate": ARGS.target_rate,
            "met": worst >= ARGS.target_rate and errors == 0,
        }
    return summary


def print_table(phases, summary):
    print()
    print(f"{'phase':<16}{'clients':>8}{'upstream':>10}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'errors':>8}"
          f"{'rows':>7}{'daphne us/req':>15}{'pg conns':>10}{'threads':>9}")  # fmt: skip
    for p in phases:
        print(f"{'s%d r%d %s' % (p['scenario'], p['round'], p['endpoint']):<16}{p['concurrency']:>8}"
              f"{p['upstream_delay_ms']:>8.0f}ms{p['rate']:>9.1f}{p['p50_ms'] or 0:>9.1f}{p['p99_ms'] or 0:>9.1f}"
              f"{p['errors']:>8}{'ok' if p['check']['passed'] else 'BAD':>7}"
              f"{p['cpu_us_per_request']['daphne']:>15}{p['samples']['pg_connections_max']:>10}"
              f"{p['samples']['daphne_threads_max']:>9}")  # fmt: skip
    print()
    if s := summary.get("scenario1"):
        print(f"scenario 1 (upstream 0 ms, {ARGS.c1} clients): intake {s['intake_rate']:.1f} req/s vs bare "
              f"{s['bare_rate']:.1f} req/s = ratio {s['ratio']:.2f} (target >= {s['target']}) "
              f"{'MET' if s['met'] else 'MISSED'}")  # fmt: skip
    if s := summary.get("scenario2"):
        print(f"scenario 2 (upstream {ARGS.slow_ms:.0f} ms, {ARGS.c2} clients): intake {s['intake_rate_min']:.1f} "
              f"leads/s (worst round), p50 {s['intake_p50_ms'] or 0:.0f} ms, p99 {s['intake_p99_ms'] or 0:.0f} ms, "
              f"errors {s['intake_errors']}, upstream max in flight {s['upstream_max_inflight']} "
              f"(target >= {s['target_rate']:.0f}/s, 0 errors) {'MET' if s['met'] else 'MISSED'}")  # fmt: skip


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as exc:
        print(f"bench: {exc}", file=sys.stderr)
        sys.exit(2)
