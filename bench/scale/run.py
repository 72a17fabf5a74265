"""One web process against two, behind nginx, and what nginx costs, in one run.

    scripts/with-services .venv/bin/python bench/scale/run.py [--rounds 2] [--duration 12] [--quick]

Two launchers run side by side, as the Procfile's `web` starts them (supervisord, deploy/supervisor/web.conf):
one with WEB_PROCESSES=1, one with WEB_PROCESSES=2, each behind its own nginx with the site deploy/render.py
renders (TRUSTED_PROXY_COUNT=1). The LLM stand-in (standins.llm) classifies at once; the V0 stand-in
(standins.v0) streams the generations. Each round measures, one after the other (the order flips every round):

  intake:  POST /api/leads, --clients closed-loop clients, --warmup then --duration seconds:
           through nginx to 1 process, through nginx to 2 processes, straight to the 2-process socket;
  streams: --streams prototype progress streams opened at once and read to `complete`, through nginx,
           on 1 process and on 2.

Targets: intake leads/s on 2 processes >= --target-scale (1.5) x on 1; streams events/s on 2 over 1 is
reported; intake through nginx >= --target-proxy (0.9) x straight to the socket. CPU seconds per web
process, nginx, PostgreSQL, Redis, the stand-ins and this process (the load generator) come from /proc.
Results: bench/scale/results.json; logs in bench/scale/out/ (git-ignored).

Exit status: 0 targets met, 1 a target missed, 2 a check failed or the bench could not run.
"""

import argparse
import asyncio
import contextlib
import json
import os
import resource
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(ROOT))
os.chdir(ROOT)

OUT_DIR = ROOT / "bench" / "scale" / "out"
RESULTS = ROOT / "bench" / "scale" / "results.json"
SUPERVISORD = [str(ROOT / ".venv/bin/supervisord"), "-n", "-c", str(ROOT / "deploy/supervisor/web.conf")]
# nginx's site allows 64 connections per client address: the stream clients spread over loopback addresses.
STREAMS_PER_ADDRESS = 50


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add = parser.add_argument
    add("--rounds", type=int, default=2, help="rounds; the order of the phases flips every round (default 2)")
    add("--duration", type=float, default=12.0, help="measured seconds per intake phase (default 12)")
    add("--warmup", type=float, default=3.0, help="unmeasured seconds before each intake phase (default 3)")
    add("--clients", type=int, default=32, help="concurrent intake clients (default 32)")
    add("--streams", type=int, default=200, help="prototype streams per stream phase (default 200)")
    add("--parts", type=int, default=60, help="V0 part frames per generation (default 60)")
    add("--interval", type=float, default=0.05, help="seconds between V0 part frames (default 0.05)")
    add("--target-scale", type=float, default=1.5, help="2 processes over 1, intake (default 1.5)")
    add("--target-proxy", type=float, default=0.9, help="through nginx over straight, intake (default 0.9)")
    add("--quick", action="store_true", help="1 round, 4 s phases, 60 streams of 20 parts: proves it runs")
    add("--results", type=Path, default=RESULTS, help="JSON output")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.duration, args.warmup, args.streams, args.parts = 1, 4.0, 1.0, 60, 20
    return args


ARGS = parse_args() if __name__ == "__main__" else None  # before Django is set up: --help needs no servers

from bench.common import (  # noqa: E402
    BenchError,
    check_alive,
    check_services,
    free_port,
    log_tail,
    machine_info,
    postmaster_pid,
    proc_stat,
    redis_client,
    run,
    start_nginx,
    start_process,
    stop_process,
    wait_http,
)

LLM_PORT, V0_PORT = free_port(), free_port()
BENCH_ENV = {
    "DJANGO_SETTINGS_MODULE": "config.settings",
    "LLM_BASE_URL": f"http://127.0.0.1:{LLM_PORT}/v1",
    "LLM_API_KEY": "bench-key",
    "LLM_MODEL": "bench-model",
    "V0_API_URL": f"http://127.0.0.1:{V0_PORT}/v2",
    "V0_API_KEY": "bench-key",
    "RECAPTCHA_SECRET_KEY": "",
    "TRUSTED_PROXY_COUNT": "1",  # nginx in front, as deployed; straight to the socket the client is believed
    # Every client is on loopback: the per-client limits count but never refuse.
    "LEADS_THROTTLE_RATE": "1000000/s",
    "PROTOTYPES_STREAM_RATE": "1000000/s",
    "STREAMS_PER_IP": "0",
    "LOG_LEVEL": "WARNING",
    "DEBUG": "false",
}
os.environ.update(BENCH_ENV)

import django  # noqa: E402

django.setup()

import aiohttp  # noqa: E402
from django.core.management import call_command  # noqa: E402

from leadgen.models import Lead  # noqa: E402
from leadgen.rules import Classification  # noqa: E402
from leadgen.services import lead_create  # noqa: E402


def web_pids(supervisord: int) -> list[int]:
    """The daphne processes a launcher runs (supervisord puts each in a process group of its own)."""
    try:
        children = Path(f"/proc/{supervisord}/task/{supervisord}/children").read_text().split()
    except OSError:
        return []
    found = []
    for pid in map(int, children):
        with contextlib.suppress(OSError):
            if b"config.serve" in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
    return sorted(found)


class Launcher:
    def __init__(self, processes: int):
        self.processes, self.port = processes, free_port()
        # A Redis database of its own (cache and channel layer): every web process hears every announcement of
        # a prototype event on the layer's one group, and the other launcher's would be counted against this one.
        redis_url = f"{os.environ['REDIS_URL'].rsplit('/', 1)[0]}/{2 + processes}"
        env = {**os.environ, "PORT": str(self.port), "BIND_HOST": "127.0.0.1", "WEB_PROCESSES": str(processes),
               "WEB_LOG_FILE": "/dev/fd/1", "WEB_LOG_SYSLOG": "false", "REDIS_URL": redis_url}  # fmt: skip
        self.process = start_process(f"web{processes}", SUPERVISORD, env=env, out_dir=OUT_DIR)
        self.direct = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 60
        while len(self.pids) < processes:
            check_alive(self.process)
            if time.monotonic() > deadline:
                raise BenchError(f"web{processes}: its processes did not start:\n{log_tail(self.process)}")
            time.sleep(0.2)
        wait_http(self.process, f"{self.direct}/healthz")
        self.nginx, self.proxied = start_nginx(f"nginx{processes}", web=f"127.0.0.1:{self.port}", out_dir=OUT_DIR)
        wait_http(self.nginx, f"{self.proxied}/healthz", timeout=20)

    @property
    def pids(self):
        return web_pids(self.process.pid)

    def stop(self):
        stop_process(self.nginx)
        stop_process(self.process)


class Cpu:
    """CPU seconds by part, from /proc: each web process, each nginx (master and worker), PostgreSQL, Redis,
    the stand-ins, this process; and the whole machine."""

    def __init__(self, launchers, stand_ins):
        self.launchers, self.stand_ins = launchers, stand_ins
        self.postmaster = postmaster_pid()
        self.redis = int(redis_client().info("server")["process_id"])

    def sample(self):
        out = {}
        groups = {}
        for launcher in self.launchers:
            for i, pid in enumerate(launcher.pids):
                out[f"web{launcher.processes}_p{i}"] = (proc_stat(pid) or (0, 0, 0.0, 0.0))[2]
            groups[launcher.nginx.pid] = f"nginx{launcher.processes}"
        for process in self.stand_ins:
            groups[process.pid] = process.name
        for name in (*groups.values(), "postgres", "redis"):
            out[name] = 0.0
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            stat = proc_stat(int(entry))
            if stat is None:
                continue
            ppid, pgrp, own, children = stat
            if pgrp in groups:
                out[groups[pgrp]] += own
            elif int(entry) == self.postmaster:
                out["postgres"] += own + children
            elif ppid == self.postmaster:
                out["postgres"] += own
            elif int(entry) == self.redis:
                out["redis"] += own
        times = os.times()
        out["load_generator"] = times.user + times.system
        cpu = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) / os.sysconf("SC_CLK_TCK") for x in cpu[:8])
        out["machine_busy"] = user + nice + system + irq + softirq
        out["steal"] = steal
        out["wall"] = time.monotonic()
        return out

    @staticmethod
    def cores(before, after):
        """Cores each part used on average between two samples (parts that used next to none left out)."""
        wall = after["wall"] - before["wall"]
        used = {key: (after[key] - before.get(key, 0.0)) / wall for key in after if key != "wall"}
        ours = sum(value for key, value in used.items() if key not in ("machine_busy", "steal"))
        used["rest_of_machine"] = max(used["machine_busy"] - ours, 0.0)
        return {key: round(value, 2) for key, value in used.items() if value >= 0.005 or key == "machine_busy"}


# --- intake ------------------------------------------------------------------------------------------------


def payload(tag, n):
    return json.dumps({
        "firstName": "Ada", "lastName": "Lovelace", "email": f"{tag}-{n}@bench.example.com",
        "phone": "+1 415 555 2671", "company": "Analytical Engines Ltd",
        "message": "We would like help automating our invoicing and reporting; about 40 people use the current tool.",
        "serviceType": "dedicated_team",  # not prototype-eligible: no prototype, no per-client hold
        "sourcePage": "https://example.com/services/dedicated-team",
        "utm": {"source": "google", "medium": "cpc", "campaign": "bench"},
    }).encode()  # fmt: skip


async def intake_load(url, tag, cpu):
    """Closed loop: --clients clients post back to back; the 200s completed within the measured window."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    measure_from, measure_to = start + ARGS.warmup, start + ARGS.warmup + ARGS.duration
    counter, latencies, window = iter(range(10**9)), [], {}
    totals = {"ok": 0, "errors": 0}

    async def client(session):
        while loop.time() < measure_to:
            began = loop.time()
            try:
                async with session.post(url, data=payload(tag, next(counter)),
                                        headers={"Content-Type": "application/json"}) as response:  # fmt: skip
                    await response.read()
                    ok = response.status == 200
            except aiohttp.ClientError:
                ok = False
            ended = loop.time()
            totals["ok" if ok else "errors"] += 1
            if ok and measure_from <= began and ended <= measure_to:
                latencies.append(ended - began)

    async def timekeeper():
        await asyncio.sleep(ARGS.warmup)
        window["before"] = cpu.sample()
        await asyncio.sleep(max(measure_to - loop.time(), 0))
        window["after"] = cpu.sample()

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0),
                                     timeout=aiohttp.ClientTimeout(total=60)) as session:  # fmt: skip
        await asyncio.gather(timekeeper(), *(client(session) for _ in range(ARGS.clients)))
    latencies.sort()
    return {
        "leads_per_s": round(len(latencies) / ARGS.duration, 1),
        "p50_ms": round(latencies[len(latencies) // 2] * 1000) if latencies else None,
        "p99_ms": round(latencies[int(len(latencies) * 0.99)] * 1000) if latencies else None,
        "ok": totals["ok"],
        "errors": totals["errors"],
        "cores": Cpu.cores(window["before"], window["after"]),
    }


def intake_phase(name, url, cpu):
    tag = f"scale-{name}-{time.monotonic_ns()}"
    result = asyncio.run(intake_load(f"{url}/api/leads", tag, cpu))
    rows = Lead.objects.filter(email__startswith=f"{tag}-").count()
    if rows != result["ok"]:
        raise BenchError(f"{name}: {result['ok']} leads answered 200 but {rows} rows written")
    return result


# --- prototype streams ---------------------------------------------------------------------------------------


def stream_leads(tag):
    rules = Classification("lead", 0.9, "bench", Lead.Classifier.RULES)
    fields = {"first_name": "Bench", "service_type": "diagnostic", "message": "Automate our monthly report."}
    return [
        lead_create(fields={**fields, "email": f"{tag}-{i}@bench.example.com"}, client_ip="10.0.0.1",
                    classification=rules).public_id
        for i in range(ARGS.streams)
    ]  # fmt: skip


async def read_stream(session, url):
    """Events read until `complete`; an exception if the stream fails or ends without it."""
    events = 0
    async with session.get(url, headers={"Accept": "text/event-stream"},
                           timeout=aiohttp.ClientTimeout(total=None, sock_read=120)) as response:  # fmt: skip
        if response.status != 200:
            raise BenchError(f"HTTP {response.status}")
        async for line in response.content:
            if line.startswith(b"event: "):
                events += 1
                if line.strip() in (b"event: complete", b"event: error"):
                    return events, line.strip() == b"event: complete"
    raise BenchError("stream ended without complete")


async def streams_load(base, lead_ids):
    sessions = [
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0, local_addr=(f"127.0.1.{k + 1}", 0)))
        for k in range(-(-len(lead_ids) // STREAMS_PER_ADDRESS))
    ]
    try:
        started = time.monotonic()
        results = await asyncio.gather(
            *(read_stream(sessions[i // STREAMS_PER_ADDRESS], f"{base}/api/leads/{lead}/generate-stream")
              for i, lead in enumerate(lead_ids)),
            return_exceptions=True,
        )  # fmt: skip
        return time.monotonic() - started, results
    finally:
        for session in sessions:
            await session.close()


def streams_phase(name, base, cpu):
    lead_ids = stream_leads(f"scale-{name}-{time.monotonic_ns()}")
    before = cpu.sample()
    elapsed, results = asyncio.run(streams_load(base, lead_ids))
    after = cpu.sample()
    done = [r for r in results if not isinstance(r, BaseException)]
    failed = [r for r in results if isinstance(r, BaseException)]
    events = sum(count for count, _ in done)
    out = {
        "events_per_s": round(events / elapsed, 1),
        "seconds": round(elapsed, 2),
        "events": events,
        "completed": sum(1 for _, complete in done if complete),
        "failed": len(failed) + sum(1 for _, complete in done if not complete),
        "cores": Cpu.cores(before, after),
    }
    if failed:
        out["first_failure"] = repr(failed[0])[:200]
    return out


# --- the run -------------------------------------------------------------------------------------------------


def web_cpu(result, launcher, per):
    """The phase's launcher's cores over its rate: CPU milliseconds per lead or per event, and its cores."""
    cores = sum(value for key, value in result["cores"].items() if key.startswith(f"web{launcher}_"))
    rate = result[f"{per}s_per_s"]
    result["web_cores"] = round(cores, 2)
    result[f"web_cpu_ms_per_{per}"] = round(cores * 1000 / rate, 3) if rate else None


def median_of(rounds, phase, key):
    return statistics.median(r[phase][key] for r in rounds)


def main():
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # the servers inherit it: hundreds of sockets
    check_services()
    call_command("migrate", verbosity=0)
    env = dict(os.environ)
    llm = start_process("llm", [sys.executable, "-m", "standins.llm", "--port", str(LLM_PORT),
                                "--api-key", "bench-key"], env=env, out_dir=OUT_DIR)  # fmt: skip
    v0 = start_process("v0", [sys.executable, "-m", "standins.v0", "--port", str(V0_PORT), "--api-key", "bench-key",
                              "--parts", str(ARGS.parts), "--interval", str(ARGS.interval), "--finish-after", "0",
                              "--plan-every", "0"], env=env, out_dir=OUT_DIR)  # fmt: skip
    started, launchers = [llm, v0], []
    try:
        wait_http(llm, f"http://127.0.0.1:{LLM_PORT}/_stats", timeout=30)
        wait_http(v0, f"http://127.0.0.1:{V0_PORT}/v2/chats", timeout=30)
        one, two = Launcher(1), Launcher(2)
        launchers += [one, two]
        cpu = Cpu(launchers, started)
        results = {
            "machine": machine_info(
                clients=ARGS.clients, duration=ARGS.duration, warmup=ARGS.warmup,
                streams=ARGS.streams, parts=ARGS.parts, interval=ARGS.interval, rounds=ARGS.rounds,
            ),
            "rounds": [],
        }  # fmt: skip
        intake = [("nginx_1_process", one.proxied), ("nginx_2_processes", two.proxied),
                  ("direct_2_processes", two.direct)]  # fmt: skip
        streams = [("streams_1_process", one.proxied), ("streams_2_processes", two.proxied)]
        for n in range(ARGS.rounds):
            order = intake if n % 2 == 0 else intake[::-1]
            round_ = {}
            for name, url in order:
                round_[name] = intake_phase(name, url, cpu)
                print(f"round {n + 1} {name}: {round_[name]['leads_per_s']} leads/s {round_[name]['cores']}")
            for name, url in streams if n % 2 == 0 else streams[::-1]:
                round_[name] = streams_phase(name, url, cpu)
                print(f"round {n + 1} {name}: {round_[name]['events_per_s']} events/s {round_[name]['cores']}")
            for launcher in launchers:
                check_alive(launcher.process)
                check_alive(launcher.nginx)
            results["rounds"].append(round_)
        results["machine"]["loadavg_at_end"] = os.getloadavg()
    finally:
        for launcher in launchers:
            launcher.stop()
        for process in started:
            stop_process(process)

    rounds = results["rounds"]
    for r in rounds:
        for name, _ in intake:
            web_cpu(r[name], 1 if name.endswith("1_process") else 2, "lead")
        for name, _ in streams:
            web_cpu(r[name], 1 if name.endswith("1_process") else 2, "event")
    summary = {
        "intake_leads_per_s": {name: median_of(rounds, name, "leads_per_s") for name, _ in intake},
        "streams_events_per_s": {name: median_of(rounds, name, "events_per_s") for name, _ in streams},
    }
    summary["scale_intake"] = round(summary["intake_leads_per_s"]["nginx_2_processes"]
                                    / summary["intake_leads_per_s"]["nginx_1_process"], 3)  # fmt: skip
    summary["scale_streams"] = round(summary["streams_events_per_s"]["streams_2_processes"]
                                     / summary["streams_events_per_s"]["streams_1_process"], 3)  # fmt: skip
    summary["proxy_intake"] = round(summary["intake_leads_per_s"]["nginx_2_processes"]
                                    / summary["intake_leads_per_s"]["direct_2_processes"], 3)  # fmt: skip
    summary["per_round"] = [
        {"scale_intake": round(r["nginx_2_processes"]["leads_per_s"] / r["nginx_1_process"]["leads_per_s"], 3),
         "scale_streams": round(r["streams_2_processes"]["events_per_s"] / r["streams_1_process"]["events_per_s"], 3),
         "proxy_intake": round(r["nginx_2_processes"]["leads_per_s"] / r["direct_2_processes"]["leads_per_s"], 3)}
        for r in rounds
    ]  # fmt: skip
    errors = sum(r[name]["errors"] for r in rounds for name, _ in intake)
    failed = sum(r[name]["failed"] for r in rounds for name, _ in streams)
    summary["intake_errors"], summary["streams_failed"] = errors, failed
    met = {
        "scale_intake": summary["scale_intake"] >= ARGS.target_scale,
        "proxy_intake": summary["proxy_intake"] >= ARGS.target_proxy,
        "no_errors": errors == 0 and failed == 0,
    }
    results["summary"], results["targets_met"] = summary, met
    ARGS.results.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps({"summary": summary, "targets_met": met}, indent=2))
    return 0 if all(met.values()) else 1


if __name__ == "__main__":
    run(main, "scale")
