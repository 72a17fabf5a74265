"""search_docs tool calls through our MCP server vs the bare SDK server, side by side in one run.

    scripts/with-services .venv/bin/python bench/mcp/run.py [--rounds 3] [--duration 10] [--clients 50]

Servers (each its own process on uvicorn, both started before the first phase):

  bare     bench/mcp/bare_server.py: the SDK's server with the same tool, nothing around it;
  durable  bench/mcp/durable_server.py: the same with ours' promises kept the plain way: the same bearer
           tokens, each call recorded on the caller's profile by a database call of its own;
  ours     config.mcp_asgi, as the Procfile's `mcp` serves it: Auth0 bearer tokens (RS256, checked on every
         request), the tool wrapper (`context` validated and stripped, the per-user rate counted in
         Redis, the call recorded in PostgreSQL).

The Kapa stand-in (standins/kapa.py, its own process) answers retrieval after --delay-ms (20 ms); the Auth0
stand-in (standins/auth0.py, in this process) signs the clients' tokens and serves its JWKS.
Each phase runs --clients concurrent MCP clients (a session each: initialize, then tools/call in a loop,
JSON-RPC over HTTP with aiohttp) for --warmup + --duration seconds; the order of the servers rotates each
round. Calls per second and p50/p99 latency are over the measured seconds. After each phase of ours (and of
durable) the calls recorded per user are checked against the calls the clients saw succeed (nothing lost,
nothing twice).

Target: ours >= --target-ratio (1.0) x bare calls per second (medians over the rounds); ours against
durable is reported.
Exit status: 0 target met, 1 missed, 2 a check failed or the bench could not run.
"""

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(ROOT))
os.chdir(ROOT)
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import aiohttp  # noqa: E402
import django  # noqa: E402

from bench.common import (  # noqa: E402
    BenchError,
    CpuMeter,
    check_alive,
    check_services,
    free_port,
    machine_info,
    run,
    start_process,
    stop_process,
    wait_http,
)

OUT_DIR = ROOT / "bench" / "mcp" / "out"
RESULTS = ROOT / "bench" / "mcp" / "results.json"
BIN = Path(sys.executable).parent
AUDIENCE = "https://bench.example.com/mcp"
PROTOCOL = "2025-11-25"
QUERY = {"query": "How do I enable TLS on a cluster?"}
CONTEXT = "The user is setting up a secure cluster and asks how to turn TLS on."


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=10.0, help="measured seconds per phase")
    parser.add_argument("--warmup", type=float, default=2.0, help="unmeasured seconds before each phase")
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--delay-ms", type=float, default=20.0, help="Kapa's answer time")
    parser.add_argument("--target-ratio", type=float, default=1.0)
    parser.add_argument("--servers", default="bare,durable,ours")
    parser.add_argument("--results", type=Path, default=RESULTS, help="JSON output (default %(default)s)")
    return parser.parse_args()


# --- load ---------------------------------------------------------------------------------------------


async def client(http, base, token, arguments, *, measure_from, stop_at, tally):
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    initialize = {
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}},
    }  # fmt: skip
    async with http.post(f"{base}/mcp", json=initialize, headers=headers) as response:
        if response.status != 200:
            raise BenchError(f"initialize: HTTP {response.status}: {await response.text()}")
        headers["Mcp-Session-Id"] = response.headers["Mcp-Session-Id"]
        await response.read()
    headers["MCP-Protocol-Version"] = PROTOCOL
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    async with http.post(f"{base}/mcp", json=initialized, headers=headers):
        pass
    call_id = 0
    while time.monotonic() < stop_at:
        call_id += 1
        body = {"jsonrpc": "2.0", "id": call_id, "method": "tools/call",
                "params": {"name": "search_docs", "arguments": arguments}}  # fmt: skip
        started = time.monotonic()
        async with http.post(f"{base}/mcp", json=body, headers=headers) as response:
            answer = await response.json(content_type=None) if response.status == 200 else {}
        ended = time.monotonic()
        ok = "result" in answer and not answer["result"].get("isError")
        tally["ok_total" if ok else "errors_total"] += 1
        if started >= measure_from and ended <= stop_at + 5:
            if ok:
                tally["latencies"].append(ended - started)
                if ended <= stop_at:
                    tally["ok_measured"] += 1
            else:
                tally["errors"] += 1


async def phase(base, tokens, arguments, *, clients, warmup, duration):
    tally = {"latencies": [], "ok_measured": 0, "ok_total": 0, "errors": 0, "errors_total": 0}
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=60)) as http:
        now = time.monotonic()
        measure_from, stop_at = now + warmup, now + warmup + duration
        await asyncio.gather(*(
            client(http, base, tokens[n] if tokens else None, arguments, measure_from=measure_from, stop_at=stop_at,
                   tally=tally)
            for n in range(clients)
        ))  # fmt: skip
    latencies = sorted(tally["latencies"])
    return {
        "calls_per_s": round(tally["ok_measured"] / duration, 1),
        "p50_ms": round(statistics.median(latencies) * 1000, 1) if latencies else None,
        "p99_ms": round(latencies[int(len(latencies) * 0.99)] * 1000, 1) if latencies else None,
        "errors": tally["errors"],
        "ok_total": tally["ok_total"],
        "errors_total": tally["errors_total"],
    }


# --- checks -------------------------------------------------------------------------------------------


def recorded_calls(subs) -> int:
    from docs_users.models import TrackedUser

    return sum(user.mcp_tool_counts.get("search_docs", 0) for user in TrackedUser.objects.filter(sub__in=subs))


def main():
    args = parse_args()
    django.setup()
    check_services()
    machine = machine_info()  # before the servers start: the load the host had of its own
    from standins.auth0 import Auth0

    OUT_DIR.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v0"], check=True)
    auth0 = Auth0(audience=AUDIENCE).start()  # its JWKS is fetched once per server process: nothing to measure

    upstream_port = free_port()
    upstream = f"http://127.0.0.1:{upstream_port}"
    subs = [f"auth0|bench-{n}" for n in range(args.clients)]
    tokens = [auth0.mint(sub, exp=int(time.time()) + 7200) for sub in subs]

    ports = {name: free_port() for name in ("bare", "durable", "ours")}
    env = dict(os.environ)
    env.update(
        AUTH0_DOMAIN=auth0.domain, MCP_AUDIENCE=AUDIENCE, KAPA_API_URL=upstream, KAPA_API_KEY="bench",
        KAPA_PROJECT_ID="bench", KAPA_OWNER_SALT="bench-salt", MCP_TOOL_CALLS_RATE="1000000/min",
        ALLOWED_HOSTS="127.0.0.1,localhost", DATA_DIR=str(OUT_DIR / "data"),
    )  # fmt: skip
    commands = {
        "bare": [str(BIN / "uvicorn"), "bench.mcp.bare_server:app", "--host", "127.0.0.1", "--port", str(ports["bare"]),
                 ],
        "durable": [str(BIN / "uvicorn"), "bench.mcp.durable_server:app", "--host", "127.0.0.1",
                    "--port", str(ports["durable"])],
        "ours": [str(BIN / "uvicorn"), "config.mcp_asgi:application", "--host", "127.0.0.1",
                 "--port", str(ports["ours"]), "--no-server-header"],
    }  # fmt: skip
    servers = [name for name in args.servers.split(",") if name]
    processes = [
        start_process(
            "upstream",
            [sys.executable, "-m", "standins.kapa", "--port", str(upstream_port), "--retrieval-ms", str(args.delay_ms),
             "--api-key", "bench", "--project-id", "bench"],
            env=env, out_dir=OUT_DIR,
        )
    ]  # fmt: skip
    try:
        wait_http(processes[0], f"{upstream}/")
        for name in servers:
            processes.append(start_process(name, commands[name],
                                           env={**env, "SITE_URL": f"http://127.0.0.1:{ports[name]}"}, out_dir=OUT_DIR))
            wait_http(processes[-1], f"http://127.0.0.1:{ports[name]}/mcp")
        results = {name: [] for name in servers}
        pids = {process.name: process.pid for process in processes}
        for round_number in range(args.rounds):
            order = servers[round_number % len(servers):] + servers[: round_number % len(servers)]
            for name in order:
                ours, recording = name == "ours", name != "bare"
                before = recorded_calls(subs) if recording else 0
                meter = CpuMeter(own="load", groups={"server": [pids[name]], "upstream": [pids["upstream"]]})
                cpu_before = meter.sample()
                outcome = asyncio.run(phase(
                    f"http://127.0.0.1:{ports[name]}", tokens if recording else None,
                    {**QUERY, "context": CONTEXT} if ours else QUERY,
                    clients=args.clients, warmup=args.warmup, duration=args.duration,
                ))  # fmt: skip
                cpu = meter.per_unit(cpu_before, meter.sample(), outcome["ok_total"])
                outcome["cpu_us_per_call"] = {part: cpu[part] for part in ("server", "upstream", "load", "postgres",
                                                                           "redis", "other_processes")}  # fmt: skip
                if recording:
                    recorded = recorded_calls(subs) - before
                    outcome["recorded"] = recorded
                    if recorded != outcome["ok_total"]:
                        raise BenchError(f"{name}: {outcome['ok_total']} calls succeeded, {recorded} recorded")
                results[name].append(outcome)
                print(f"round {round_number + 1} {name:13} {json.dumps(outcome)}", flush=True)
        for process in processes:
            check_alive(process)
    finally:
        for process in reversed(processes):
            stop_process(process)
        auth0.stop()

    summary = {
        name: {
            "calls_per_s": statistics.median(r["calls_per_s"] for r in runs),
            "p50_ms": statistics.median(r["p50_ms"] for r in runs),
            "p99_ms": statistics.median(r["p99_ms"] for r in runs),
            "errors": sum(r["errors"] for r in runs),
        }
        for name, runs in results.items()
    }
    def ours_over(baseline: str) -> float | None:
        if not {"ours", baseline} <= set(summary):
            return None
        return round(summary["ours"]["calls_per_s"] / summary[baseline]["calls_per_s"], 3)

    ratio, durable_ratio = ours_over("bare"), ours_over("durable")
    report = {
        "machine": machine,
        "settings": vars(args) | {"results": str(args.results)},
        "rounds": results,
        "summary": summary,
        "ratio_ours_to_bare": ratio,
        "ratio_ours_to_durable": durable_ratio,
        "target_met": ratio is not None and ratio >= args.target_ratio,
    }
    args.results.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({"summary": summary, "ratio_ours_to_bare": ratio, "ratio_ours_to_durable": durable_ratio},
                     indent=2))
    return 0 if report["target_met"] else 1


if __name__ == "__main__":
    run(main, "mcp")
