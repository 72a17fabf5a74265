"""GET /api/posts on a warm cache against a bare view serving the same bytes, and a cold burst, on daphne + Redis.

    scripts/with-services .venv/bin/python bench/blog/run.py [--rounds 3] [--duration 8]

daphne serves both endpoints (bench/blog/settings.py adds the bare one,
bench/blog/bare.py: one cache read of the same key, the same bytes); the
WordPress stand-in (standins/wordpress.py) runs in this process and
counts its calls.

  warm:  --concurrency (100) closed-loop clients spread over --daphne-procs (2)
         processes; phases alternate between the two endpoints, --rounds each.
         Target: /api/posts >= --target-ratio (1.0) x the bare view's requests/s,
         every answer a 200 with X-Cache: hit. p50/p99 latency reported.
  cold:  --bursts (3) times: purge through DELETE /api/posts/cache, then --burst
         (500) requests for one page at once, WordPress taking --upstream-ms
         (200 ms) to answer. Target: exactly 1 WordPress call per burst, every
         answer a 200 with the same body.

Exit status: 0 targets met, 1 a target missed, 2 the bench could not run.
"""

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(ROOT))
os.chdir(ROOT)

from bench.common import (  # noqa: E402
    BenchError,
    check_services,
    free_ports,
    machine_info,
    percentile,
    proc_stat,
    run,
    start_process,
    stop_process,
    wait_http,
)
from standins.wordpress import WordPress  # noqa: E402

OUT_DIR = ROOT / "bench" / "blog" / "out"  # git-ignored: daphne logs
RESULTS = ROOT / "bench" / "blog" / "results.json"
BIN = Path(sys.executable).parent
OURS, BARE = "/api/posts", "/bench/bare-posts"
PURGE_KEY = "bench-purge-key"


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3, help="phases per endpoint, alternating (default 3)")
    parser.add_argument("--duration", type=float, default=8.0, help="measured seconds per phase (default 8)")
    parser.add_argument("--warmup", type=float, default=2.0, help="unmeasured seconds before each phase (default 2)")
    parser.add_argument("--concurrency", type=int, default=100, help="warm-cache clients (default 100)")
    parser.add_argument("--daphne-procs", type=int, default=2, help="daphne processes, one per core (default 2)")
    parser.add_argument("--target-ratio", type=float, default=1.0, help="warm target (default 1.0)")
    parser.add_argument("--burst", type=int, default=500, help="requests of one cold burst (default 500)")
    parser.add_argument("--bursts", type=int, default=3, help="cold bursts (default 3)")
    parser.add_argument("--upstream-ms", type=float, default=200.0, help="WordPress answer time, cold (default 200)")
    parser.add_argument("--results", type=Path, default=RESULTS, help="JSON output (default %(default)s)")
    return parser.parse_args()


ARGS = parse_args() if __name__ == "__main__" else None  # before Django is set up: --help needs no servers
FAKE = WordPress(port=free_ports(1)[0])  # started by main()
BENCH_ENV = {
    "DJANGO_SETTINGS_MODULE": "bench.blog.settings",
    "PYTHONPATH": str(ROOT),
    "WORDPRESS_API_URL": FAKE.api_url,
    "WORDPRESS_TIMEOUT_SECONDS": "10",
    "BLOG_CACHE_TTL_SECONDS": "3600",
    "BLOG_CACHE_API_KEY": PURGE_KEY,
    # Throttled as in production (one counter per client and window), never refused: all from 127.0.0.1.
    "BLOG_THROTTLE_RATE": "100000000/min",
    "BLOG_PURGE_THROTTLE_RATE": "100000/min",
    "LOG_LEVEL": "WARNING",
    "DEBUG": "false",
}
os.environ.update(BENCH_ENV)

import django  # noqa: E402

django.setup()

import aiohttp  # noqa: E402


def http(method, url, headers=None):
    request = urllib.request.Request(url, method=method, headers=headers or {})
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.status, dict(response.headers), response.read()


def daphne_cpu_seconds(pids):
    return sum(stat[2] + stat[3] for stat in map(proc_stat, pids) if stat)


async def closed_loop(urls, *, expect_hit, pids):
    """`concurrency` clients GET back to back (client i to urls[i % len]); records inside the window count,
    and the CPU the daphne processes spent in the window."""
    loop = asyncio.get_running_loop()
    records = []  # (started, ended, ok)
    start = loop.time()
    measure_from, measure_to = start + ARGS.warmup, start + ARGS.warmup + ARGS.duration
    cpu = {}

    async def timekeeper():
        await asyncio.sleep(max(measure_from - loop.time(), 0))
        cpu["start"] = daphne_cpu_seconds(pids)
        await asyncio.sleep(max(measure_to - loop.time(), 0))
        cpu["end"] = daphne_cpu_seconds(pids)

    async def client(session, url):
        while loop.time() < measure_to:
            began = loop.time()
            ok = False
            try:
                async with session.get(url) as response:
                    await response.read()
                    ok = response.status == 200 and (not expect_hit or response.headers.get("X-Cache") == "hit")
            except Exception:  # noqa: BLE001 - every failure counts as an error
                ok = False
            records.append((began, loop.time(), ok))

    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=60)) as session:
        await asyncio.gather(timekeeper(), *(client(session, urls[i % len(urls)]) for i in range(ARGS.concurrency)))
    inside = [r for r in records if measure_from <= r[1] <= measure_to]
    latencies = sorted((ended - began) * 1000 for began, ended, ok in inside if ok)
    return {
        "requests_per_second": round(len(latencies) / ARGS.duration, 1),
        "daphne_cpu_us_per_request": round((cpu["end"] - cpu["start"]) / max(len(inside), 1) * 1e6),
        "errors": sum(1 for r in inside if not r[2]),
        "p50_ms": round(percentile(latencies, 0.5) or 0, 2),
        "p99_ms": round(percentile(latencies, 0.99) or 0, 2),
    }


async def cold_burst(urls):
    """`burst` requests released together, spread over the daphne processes."""
    gate = asyncio.Event()
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=120)) as session:

        async def one(i):
            await gate.wait()
            began = time.monotonic()
            try:
                async with session.get(urls[i % len(urls)]) as response:
                    body = await response.read()
                    return response.status, response.headers.get("X-Cache"), body, time.monotonic() - began
            except Exception as exc:  # noqa: BLE001
                return type(exc).__name__, None, b"", time.monotonic() - began

        tasks = [asyncio.create_task(one(i)) for i in range(ARGS.burst)]
        await asyncio.sleep(0.2)  # every task is waiting at the gate
        gate.set()
        return await asyncio.gather(*tasks)


def main():
    check_services()
    ports = free_ports(ARGS.daphne_procs)
    daphnes = []
    FAKE.start()
    try:
        for i, port in enumerate(ports):
            command = [str(BIN / "daphne"), "-b", "127.0.0.1", "-p", str(port), "config.asgi:application"]
            daphnes.append(start_process(f"daphne{i}", command, env=dict(os.environ), out_dir=OUT_DIR))
        for process, port in zip(daphnes, ports, strict=True):
            wait_http(process, f"http://127.0.0.1:{port}/healthz")
        bases = [f"http://127.0.0.1:{port}" for port in ports]
        args = vars(ARGS) | {"results": str(ARGS.results)}
        results = {"machine": machine_info(daphne_procs=ARGS.daphne_procs), "args": args}
        results["warm"] = warm(bases, [process.pid for process in daphnes])
        results["cold"] = cold(bases)
    finally:
        for process in daphnes:
            stop_process(process)
        FAKE.stop()
    summarize(results)
    ARGS.results.write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nwritten {ARGS.results}")
    return 0 if results["targets_met"] else 1


def warm(bases, pids):
    status, headers, ours_body = http("GET", bases[0] + OURS)  # fills the cache (a miss)
    _, _, bare_body = http("GET", bases[0] + BARE)
    if status != 200 or ours_body != bare_body:
        raise BenchError("the bare view does not serve the bytes /api/posts serves")
    print(f"warm cache: {len(ours_body)} bytes per answer, {ARGS.concurrency} clients, {ARGS.daphne_procs} daphne")
    phases = []
    for round_no in range(ARGS.rounds):
        order = (OURS, BARE) if round_no % 2 == 0 else (BARE, OURS)
        for path in order:
            result = asyncio.run(closed_loop([base + path for base in bases], expect_hit=path == OURS, pids=pids))
            result.update(endpoint=path, round=round_no + 1)
            phases.append(result)
            print(f"  round {round_no + 1} {path:18} {result['requests_per_second']:8.1f} req/s  "
                  f"p50 {result['p50_ms']:6.2f} ms  p99 {result['p99_ms']:7.2f} ms  "
                  f"daphne CPU {result['daphne_cpu_us_per_request']} us/request  "
                  f"errors {result['errors']}")  # fmt: skip
    return phases


def cold(bases):
    FAKE.delay = ARGS.upstream_ms / 1000
    bursts = []
    for burst_no in range(ARGS.bursts):
        status, _, _ = http("DELETE", bases[0] + "/api/posts/cache", headers={"X-Cache-Api-Key": PURGE_KEY})
        if status != 200:
            raise BenchError(f"purge answered {status}")
        calls_before = FAKE.calls
        started = time.monotonic()
        answers = asyncio.run(cold_burst([base + OURS + "?page=2" for base in bases]))
        elapsed = time.monotonic() - started
        statuses = {}
        for status, *_ in answers:
            statuses[str(status)] = statuses.get(str(status), 0) + 1
        outcomes = {}
        for _, outcome, _, _ in answers:
            outcomes[str(outcome)] = outcomes.get(str(outcome), 0) + 1
        result = {
            "burst": burst_no + 1,
            "requests": ARGS.burst,
            "upstream_calls": FAKE.calls - calls_before,
            "statuses": statuses,
            "x_cache": outcomes,
            "distinct_bodies": len({body for _, _, body, _ in answers}),
            "all_answered_s": round(elapsed, 2),
            "median_answer_s": round(statistics.median(seconds for *_, seconds in answers), 3),
        }
        bursts.append(result)
        print(f"cold burst {burst_no + 1}: {ARGS.burst} requests -> {result['upstream_calls']} WordPress call(s), "
              f"statuses {statuses}, X-Cache {outcomes}, all answered in {elapsed:.2f} s")  # fmt: skip
    FAKE.delay = 0
    return bursts


def summarize(results):
    by_endpoint = {OURS: [], BARE: []}
    for phase in results["warm"]:
        by_endpoint[phase["endpoint"]].append(phase)
    ours = statistics.median(p["requests_per_second"] for p in by_endpoint[OURS])
    bare = statistics.median(p["requests_per_second"] for p in by_endpoint[BARE])
    ratio = ours / bare if bare else 0.0
    # Each round's two phases ran back to back under about the same machine load: their ratio, per round.
    paired = [o["requests_per_second"] / b["requests_per_second"]
              for o, b in zip(by_endpoint[OURS], by_endpoint[BARE], strict=True) if b["requests_per_second"]]
    cpu_ours = statistics.median(p["daphne_cpu_us_per_request"] for p in by_endpoint[OURS])
    cpu_bare = statistics.median(p["daphne_cpu_us_per_request"] for p in by_endpoint[BARE])
    warm_errors = sum(p["errors"] for p in results["warm"])
    cold_ok = all(b["upstream_calls"] == 1 and b["statuses"] == {"200": b["requests"]} and b["distinct_bodies"] == 1
                  for b in results["cold"])  # fmt: skip
    results["summary"] = {
        "ours_median_rps": ours,
        "bare_median_rps": bare,
        "ratio": round(ratio, 3),
        "ratio_per_round": [round(r, 3) for r in paired],
        "ours_daphne_cpu_us_per_request": cpu_ours,
        "bare_daphne_cpu_us_per_request": cpu_bare,
        "cpu_ratio_bare_over_ours": round(cpu_bare / cpu_ours, 3) if cpu_ours else None,
        "ours_median_p50_ms": statistics.median(p["p50_ms"] for p in by_endpoint[OURS]),
        "ours_median_p99_ms": statistics.median(p["p99_ms"] for p in by_endpoint[OURS]),
        "bare_median_p50_ms": statistics.median(p["p50_ms"] for p in by_endpoint[BARE]),
        "bare_median_p99_ms": statistics.median(p["p99_ms"] for p in by_endpoint[BARE]),
        "warm_errors": warm_errors,
        "cold_bursts_one_call_each": cold_ok,
    }
    results["targets_met"] = ratio >= ARGS.target_ratio and warm_errors == 0 and cold_ok
    summary = results["summary"]
    print(f"\nwarm: /api/posts {ours:.1f} req/s vs bare {bare:.1f} req/s = {ratio:.2f}x "
          f"(target >= {ARGS.target_ratio}); p50 {summary['ours_median_p50_ms']} vs "
          f"{summary['bare_median_p50_ms']} ms, p99 {summary['ours_median_p99_ms']} vs "
          f"{summary['bare_median_p99_ms']} ms; errors {warm_errors}")  # fmt: skip
    print(f"      per round {summary['ratio_per_round']}; daphne CPU per request {cpu_ours} vs {cpu_bare} us "
          f"(bare/ours {summary['cpu_ratio_bare_over_ours']})")
    print(f"cold: one WordPress call per burst of {ARGS.burst}: {'yes' if cold_ok else 'NO'}")
    print("targets met" if results["targets_met"] else "TARGET MISSED")


if __name__ == "__main__":
    run(main, "blog")
