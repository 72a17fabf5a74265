"""The prototype progress stream against a bare async relay, on one daphne process, in one run.

    scripts/with-services .venv/bin/python bench/sse/run.py [--streams 1000] [--parts 60] [--interval 1.0]

A fake V0 server in its own process (standins.v0) streams every
generation as --parts part frames, one every --interval seconds. One daphne
serves both endpoints (bench/sse/settings.py):

  baseline: GET /bench/relay/<chat> (bench/sse/relay.py), a minimal async view
            that only relays the upstream frames;
  ours:     GET /api/leads/<leadId>/generate-stream, the product's stream: it
            starts the generation (POST /chats/async), relays V0's stream into
            the event log, announces each event through Redis and streams it.

--streams clients (aiohttp, this process) open their stream at once and read
to the end. Measured per phase: streams completed, events delivered per
second, delay from the upstream writing a part frame to the client reading
the event for it (p50/p95/p99, same clock), and daphne's RSS per open stream.
Targets: every stream completes, our p99 delay < --target-p99-ms (250), our
events/s >= --target-ratio (0.8) x the baseline's. Results: bench/sse/results.json.

Exit status: 0 targets met, 1 a target missed, 2 the bench could not run.
"""

import argparse
import asyncio
import atexit
import json
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(ROOT))
os.chdir(ROOT)

OUT_DIR = ROOT / "bench" / "sse" / "out"  # git-ignored: daphne and fake upstream logs
RESULTS = ROOT / "bench" / "sse" / "results.json"
BIN = Path(sys.executable).parent


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--parts", type=int, default=60, help="upstream part frames per generation (default 60)")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between part frames (default 1)")
    parser.add_argument("--target-p99-ms", type=float, default=250.0)
    parser.add_argument("--target-ratio", type=float, default=0.8)
    parser.add_argument("--results", type=Path, default=RESULTS, help="JSON output (default %(default)s)")
    return parser.parse_args()


ARGS = parse_args() if __name__ == "__main__" else None  # before Django is set up: --help needs no servers

from bench.common import (  # noqa: E402
    BenchError,
    check_services,
    free_port,
    machine_info,
    run,
    start_process,
    stop_process,
    wait_http,
)

STARTED = []  # what this run started: stopped however it ends


def start(name, command):
    """A server in its own process group, stopped by stop_started() at exit, on SIGTERM/SIGINT/SIGHUP, and,
    should this process be killed outright, by the kernel (setpriv --pdeathsig: the child's own parent-death
    signal)."""
    process = start_process(name, ["setpriv", "--pdeathsig", "KILL", *command], env=dict(os.environ), out_dir=OUT_DIR)
    STARTED.append(process)
    return process


def stop_started():
    while STARTED:
        process = STARTED.pop()
        try:
            stop_process(process)
        except (OSError, subprocess.SubprocessError) as exc:
            print(f"bench/sse: stopping {process.name}: {exc}", file=sys.stderr)


def _exit_on_signal(signum, _frame):
    raise SystemExit(128 + signum)  # unwinds through the finally blocks, then atexit


def start_fake():
    """The V0 stand-in: each message ends with its stream (no finish of its own, no plan), as the bench reads it."""
    command = [sys.executable, "-m", "standins.v0", "--port", str(FAKE_PORT), "--api-key", "bench-key", "--parts",
               str(ARGS.parts), "--interval", str(ARGS.interval), "--finish-after", "0", "--plan-every", "0",
               "--emitted", str(EMITTED)]  # fmt: skip
    process = start("fake-v0", command)
    wait_http(process, f"{FAKE_URL}/chats", timeout=30)
    return process


FAKE_PORT = free_port()  # the stand-in is started by main(), this process's settings name it first
FAKE_URL = f"http://127.0.0.1:{FAKE_PORT}/v2"
EMITTED = OUT_DIR / "emitted.json"
BENCH_ENV = {
    "DJANGO_SETTINGS_MODULE": "bench.sse.settings",
    "PYTHONPATH": str(ROOT),
    "V0_API_URL": FAKE_URL,
    "V0_API_KEY": "bench-key",
    "PROTOTYPES_STREAM_RATE": "1000000/s",  # every client is 127.0.0.1
    "MAX_CONNECTIONS_PER_IP": "0",  # likewise: no cap on connections
    "STREAMS_PER_IP": "0",  # nor on streams: their slots are still taken and given back, as in production
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
from prototypes.models import Prototype  # noqa: E402


def rss_kib(pid) -> int:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:  # gone: the run is being stopped
        return 0
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def cpu_seconds(pid) -> float:
    """The process's user + system CPU time so far."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class RssSampler(threading.Thread):
    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.peak, self._done = pid, 0, threading.Event()

    def run(self):
        while not self._done.wait(0.25):
            self.peak = max(self.peak, rss_kib(self.pid))

    def stop(self):
        self._done.set()
        self.join()
        return self.peak


HEADERS_AT: dict[str, float] = {}  # url -> when its response's headers arrived


async def read_stream(session, url, on_event):
    """One client: read SSE events to the end; on_event(kind, data, received_at) for each."""
    async with session.get(url, timeout=aiohttp.ClientTimeout(total=None, sock_read=120)) as response:
        HEADERS_AT[url] = time.time()
        if response.status != 200:
            raise BenchError(f"{url}: HTTP {response.status}")
        kind, data = None, None
        async for raw in response.content:
            line = raw.decode().rstrip("\n")
            if line.startswith("event: "):
                kind = line[7:]
            elif line.startswith("data: ") or line.startswith("data:"):
                data = line.split(":", 1)[1].strip()
            elif not line and kind:
                if on_event(kind, data, time.time()):
                    return True
                kind, data = None, None
    return False


async def phase(base_url, urls, on_event_for):
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        started = time.monotonic()
        results = await asyncio.gather(
            *(read_stream(session, url, on_event_for(i)) for i, url in enumerate(urls)), return_exceptions=True
        )
        elapsed = time.monotonic() - started
    errors = [r for r in results if isinstance(r, BaseException)]
    return elapsed, sum(1 for r in results if r is True), errors


def percentiles(values):
    if not values:
        return {}
    ordered = sorted(values)

    def at(q):
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 1)

    return {"p50_ms": at(0.50), "p95_ms": at(0.95), "p99_ms": at(0.99), "max_ms": round(ordered[-1] * 1000, 1)}


def main():
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # daphne inherits it: thousands of sockets
    atexit.register(stop_started)
    for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(number, _exit_on_signal)
    start_fake()
    check_services()
    call_command("migrate", verbosity=0)
    Prototype.objects.all().delete()
    Lead.objects.all().delete()
    rules = Classification("lead", 0.9, "bench", Lead.Classifier.RULES)
    leads = [
        lead_create(
            fields={
                "first_name": "Bench",
                "email": f"bench{i}@example.com",
                "service_type": "diagnostic",
                "message": "Automate our monthly report.",
            },  # fmt: skip
            client_ip=f"10.0.{i // 250}.{i % 250 + 1}",
            classification=rules,
        )
        for i in range(ARGS.streams)
    ]
    port = 18000 + os.getpid() % 1000
    # The web process as the Procfile runs it: daphne through config.serve.
    command = [sys.executable, "-m", "config.serve", "-b", "127.0.0.1", "-p", str(port), "config.asgi:application"]
    daphne = start("daphne", command)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                asyncio.run(_get(f"{base}/healthz"))
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise BenchError("daphne did not start") from None
                time.sleep(0.3)
        results = {"machine": machine_info(streams=ARGS.streams, parts=ARGS.parts, interval=ARGS.interval)}

        # Baseline: the same number of generations, relayed bare.
        chats = asyncio.run(_create_chats(ARGS.streams))
        received_base = [dict() for _ in chats]
        counts_base = [0] * len(chats)

        def on_base(i):
            def handle(kind, data, at):
                counts_base[i] += 1
                frame = json.loads(data)
                if frame.get("object") == "message.parts.chunk":
                    index = int(next(k for k in frame["delta"] if k != "_t"))
                    received_base[i][index] = at
                return counts_base[i] >= ARGS.parts + 4  # chat, title, parts, usage, closing chat

            return handle

        idle, cpu = rss_kib(daphne.pid), cpu_seconds(daphne.pid)
        sampler = RssSampler(daphne.pid)
        sampler.start()
        elapsed, completed, errors = asyncio.run(phase(base, [f"{base}/bench/relay/{c}" for c in chats], on_base))
        peak, cpu = sampler.stop(), cpu_seconds(daphne.pid) - cpu
        results["baseline"] = {
            "completed": completed, "errors": len(errors), "seconds": round(elapsed, 1),
            "events": sum(counts_base), "events_per_s": round(sum(counts_base) / elapsed, 1),
            "rss_idle_mib": round(idle / 1024, 1), "rss_peak_mib": round(peak / 1024, 1),
            "kib_per_stream": round((peak - idle) / ARGS.streams, 1),
            "daphne_cpu_s": round(cpu, 1), "daphne_cpu_ms_per_event": round(cpu * 1000 / max(1, sum(counts_base)), 3),
        }  # fmt: skip

        # Ours.
        received_ours = [dict() for _ in leads]
        counts_ours = [0] * len(leads)
        ended_ours = [None] * len(leads)  # when the client read `complete` (or `error`)

        def on_ours(i):
            def handle(kind, data, at):
                counts_ours[i] += 1
                event = json.loads(data)
                step = event.get("step") or 0
                if kind == "progress" and step and (step - 1) not in received_ours[i]:
                    received_ours[i][step - 1] = at
                if kind in ("complete", "error"):
                    ended_ours[i] = at
                    return True
                return False

            return handle

        idle, cpu = rss_kib(daphne.pid), cpu_seconds(daphne.pid)
        sampler = RssSampler(daphne.pid)
        sampler.start()
        opened_ours = time.time()
        urls = [f"{base}/api/leads/{lead.public_id}/generate-stream" for lead in leads]
        elapsed, completed, errors = asyncio.run(phase(base, urls, on_ours))
        peak, cpu = sampler.stop(), cpu_seconds(daphne.pid) - cpu
        results["ours"] = {
            "completed": completed, "errors": len(errors), "seconds": round(elapsed, 1),
            "events": sum(counts_ours), "events_per_s": round(sum(counts_ours) / elapsed, 1),
            "rss_idle_mib": round(idle / 1024, 1), "rss_peak_mib": round(peak / 1024, 1),
            "kib_per_stream": round((peak - idle) / ARGS.streams, 1),
            "daphne_cpu_s": round(cpu, 1), "daphne_cpu_ms_per_event": round(cpu * 1000 / max(1, sum(counts_ours)), 3),
            "prototypes_completed": Prototype.objects.filter(state="completed").count(),
        }  # fmt: skip
        if errors:
            results["ours"]["first_error"] = repr(errors[0])[:300]
    finally:
        stop_started()  # daphne, then the fake upstream, which writes its emitted times as it stops

    emitted = json.loads(EMITTED.read_text())
    base_delays = [
        received[i] - emitted[chat][i] for chat, received in zip(chats, received_base, strict=True) for i in received
    ]
    chat_of = dict(Prototype.objects.values_list("lead_id", "chat_id"))
    pid_lead = dict(Prototype.objects.values_list("pk", "lead_id"))
    our_delays_at = [
        (i, at - emitted[chat_of[lead.pk]][i])
        for lead, received in zip(leads, received_ours, strict=True)
        for i, at in received.items()
        if chat_of.get(lead.pk) in emitted and i < len(emitted[chat_of[lead.pk]])
    ]
    our_delays = [delay for _, delay in our_delays_at]
    from prototypes.models import PrototypeEvent

    logged = [
        event.created_at.timestamp() - emitted[chat_of[pid_lead[event.prototype_id]]][event.data["step"] - 1]
        for event in PrototypeEvent.objects.filter(kind="progress", data__step__gte=1)
        if chat_of.get(pid_lead[event.prototype_id]) in emitted
    ]
    results["ours"]["delay_to_log"] = percentiles(logged)
    # Where our extra time goes: opening to V0's first part (the start: the view, POST /chats/async, the
    # relay joining V0's stream), and V0's last part to `complete` in the browser (the hand-over check).
    first_parts = [emitted[chat_of[lead.pk]][0] - opened_ours for lead in leads if chat_of.get(lead.pk) in emitted]
    handovers = [
        ended - emitted[chat_of[lead.pk]][-1]
        for lead, ended in zip(leads, ended_ours, strict=True)
        if ended is not None and chat_of.get(lead.pk) in emitted
    ]
    early = max(1, ARGS.parts // 10)
    results["ours"]["delay_by_part"] = {
        f"parts_1_to_{early}": percentiles([d for i, d in our_delays_at if i < early]),
        f"parts_{early + 1}_to_{ARGS.parts - early}": percentiles(
            [d for i, d in our_delays_at if early <= i < ARGS.parts - early]
        ),
        f"last_{early}_parts": percentiles([d for i, d in our_delays_at if i >= ARGS.parts - early]),
    }
    headers_at = [HEADERS_AT[url] - opened_ours for url in urls if url in HEADERS_AT]
    results["ours"]["open_to_headers"] = percentiles(headers_at)
    results["ours"]["open_to_first_part"] = percentiles(first_parts)
    results["ours"]["last_part_to_complete"] = percentiles(handovers)
    results["baseline"]["delay"] = percentiles(base_delays)
    results["ours"]["delay"] = percentiles(our_delays)
    results["ratio_events_per_s"] = round(results["ours"]["events_per_s"] / results["baseline"]["events_per_s"], 3)
    met = {
        "all_streams_completed": results["ours"]["completed"] == ARGS.streams,
        "p99_delay": bool(our_delays) and results["ours"]["delay"]["p99_ms"] < ARGS.target_p99_ms,
        "events_per_s_ratio": results["ratio_events_per_s"] >= ARGS.target_ratio,
    }
    results["targets_met"] = met
    ARGS.results.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))
    return 0 if all(met.values()) else 1


async def _get(url):
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        await response.read()


async def _create_chats(count):
    async with aiohttp.ClientSession(headers={"Authorization": "Bearer bench-key"}) as session:

        async def one(i):
            async with session.post(f"{FAKE_URL}/chats/async", json={"message": f"bench {i}"}) as response:
                return (await response.json())["chatId"]

        return await asyncio.gather(*(one(i) for i in range(count)))


if __name__ == "__main__":
    run(main, "sse")
