"""The chat relay against a minimal relay view and a direct WebSocket client of the same fake agent, side by side.

    scripts/with-services .venv/bin/python bench/chat/run.py [--chats 200] [--tokens 300] [--rounds 4]
        [--open-rate 20] [--open-seconds 60] [--no-open-floor] [--scale-processes 2] [--launcher "…"]

One daphne process serves POST /api/chat/stream (config.asgi:application, the
production settings) in front of the agent stand-in (standins/agent.py), which streams
--tokens deltas --interval-ms apart per answer.

1. Bursts. Phases alternate:

  direct: --chats WebSocket clients at once, straight to the fake agent (the
          same library and options our relay uses);
  relay:  --chats HTTP clients at once, each POSTing one message to the relay
          and reading its SSE answer;
  floor:  the same through a minimal async Django view on the same daphne
          (bench/chat/floor.py: no key, no throttle, no database), what any
          relay through one process costs.

   Per chat: time to first token (from just before connecting to the first delta)
   and tokens per second (deltas after the first / time from the first delta to
   the last). Targets, relay against the floor: time to first token p50 and p99,
   tokens per second p50 and p1 (the slowest 1 %) each >= --target (0.9) of the
   floor's (for time to first token, floor / relay); CPU per chat of the web
   process <= --cpu-target (1.2) x the floor's. Ratios to the direct client are
   reported beside them.

2. Open loop (--open-seconds, 0 to skip): new chats arrive as a Poisson process at
   --open-rate a second through the same daphne; each arrival starts a relay chat
   and a direct chat at the same instant. Target: the relay's time to first token
   p99 at most --open-added-ms (50) above the direct client's. Then (--no-open-floor
   skips it) another such minute with the arrivals taken in turn by the relay and
   the floor, each beside its direct chat: what any relay through one daphne process
   adds, and the relay's time to first token over the floor's in the same minute,
   the same load on the process, whatever the neighbours do.

3. Scaled out (--scale-processes N, 0 to skip): the burst of --chats relay chats
   against --launcher run with WEB_PROCESSES=N and with WEB_PROCESSES=1 (each on a
   socket of its own; PORT, BIND_HOST and WEB_PROCESSES in its environment),
   rounds alternating. Target: time to first token p50 with N processes <=
   --scale-target (0.6) x with one. The floor's burst goes through the same
   launchers beside it: its own N-over-one ratio is how far any relay scales out
   on this host, where the agent and the clients share the cores.

After each relay phase every answer is checked in PostgreSQL: each chat has its
user message and exactly one complete assistant message with the full text.

Exit status: 0 targets met, 1 a target missed, 2 a check failed or the bench could not run.
"""

import argparse
import asyncio
import json
import os
import random
import shlex
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(ROOT))
os.chdir(ROOT)

from bench.common import (  # noqa: E402  (after the project root is on sys.path)
    BenchError,
    CpuMeter,
    check_services,
    free_port,
    machine_info,
    run,
    start_process,
    stop_process,
    wait_http,
)

OUT_DIR = ROOT / "bench" / "chat" / "out"  # git-ignored: daphne and fake agent logs
RESULTS = ROOT / "bench" / "chat" / "results.json"
CHAT_KEY = "bench-chat-key"


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chats", type=int, default=200, help="concurrent chats per phase (default 200)")
    parser.add_argument("--tokens", type=int, default=300, help="deltas per answer (default 300)")
    parser.add_argument("--interval-ms", type=float, default=5.0, help="time between deltas (default 5)")
    parser.add_argument("--rounds", type=int, default=4, help="rounds of each phase, order alternating (default 4)")
    parser.add_argument("--target", type=float, default=0.9, help="relay / floor target (default 0.9)")
    parser.add_argument("--cpu-target", type=float, default=1.2, help="relay / floor CPU per chat (default 1.2)")
    parser.add_argument("--open-rate", type=float, default=20.0, help="open loop: new chats a second (default 20)")
    parser.add_argument("--open-seconds", type=float, default=60.0, help="open loop: how long; 0 skips it (60)")
    parser.add_argument("--open-added-ms", type=float, default=50.0, help="open loop: relay p99 - direct p99 (50)")
    parser.add_argument(
        "--open-floor",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="open loop: then a minute of relay and floor chats in turn, the relay read against the floor (on)",
    )
    parser.add_argument("--seed", type=int, default=1, help="open loop: the arrivals' random seed (default 1)")
    parser.add_argument("--scale-processes", type=int, default=2, help="scaled out: web processes; 0 skips (2)")
    parser.add_argument("--scale-target", type=float, default=0.6, help="scaled out: N / 1 processes ttft p50")
    parser.add_argument(
        "--launcher",
        default=f"{os.path.relpath(Path(sys.executable).parent / 'supervisord')} -n -c deploy/supervisor/web.conf",
        help="scaled out: the command that serves WEB_PROCESSES web processes on BIND_HOST:PORT",
    )
    parser.add_argument("--results", type=Path, default=RESULTS, help="JSON output (default %(default)s)")
    return parser.parse_args()


ARGS = parse_args() if __name__ == "__main__" else None  # before Django is set up: --help needs no servers
AGENT_PORT, WEB_PORT = free_port(), free_port()
BENCH_ENV = {
    "DJANGO_SETTINGS_MODULE": "bench.chat.settings",
    "PYTHONPATH": str(ROOT),
    "CHAT_API_KEY": CHAT_KEY,
    "CHAT_AGENT_URL": f"ws://127.0.0.1:{AGENT_PORT}/",
    "CHAT_STREAM_RATE_PER_SESSION": "1000000/s",  # counted as in production, never refused
    "CHAT_STREAM_RATE_PER_IP": "1000000/s",  # every chat comes from 127.0.0.1
    "MAX_CONNECTIONS_PER_IP": "0",  # likewise: no cap on connections
    "STREAMS_PER_IP": "0",  # nor on streams per IP: the per-session slots are still taken and given back
    "CHAT_AGENT_TIMEOUT_SECONDS": "120",
    # As generous as the direct clients' open_timeout: on a crowded machine a handshake can wait seconds.
    "CHAT_AGENT_CONNECT_TIMEOUT_SECONDS": "60",
    "CHAT_AGENT_FIRST_TOKEN_TIMEOUT_SECONDS": "60",
    "LOG_LEVEL": "WARNING",
    "DEBUG": "false",
}
os.environ.update(BENCH_ENV)

import django  # noqa: E402

django.setup()

import aiohttp  # noqa: E402
from django.core.management import call_command  # noqa: E402

from chat.models import ChatMessage  # noqa: E402


def percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


class Chat:
    def __init__(self):
        self.started = self.first = self.last = None
        self.tokens = 0
        self.text = ""
        self.done = False

    def token(self, content):
        now = time.perf_counter()
        if self.first is None:
            self.first = now
        self.last = now
        self.tokens += 1
        self.text += content

    @property
    def ttft(self):
        return self.first - self.started

    @property
    def rate(self):
        return (self.tokens - 1) / (self.last - self.first)

    @property
    def answer_seconds(self):
        return self.last - self.started


async def direct_chat(start: asyncio.Event, session_id: str) -> Chat:
    chat = Chat()
    await start.wait()
    chat.started = time.perf_counter()
    # As integrations.agent connects: aiohttp, no compression, no keepalive pings, one session per chat.
    async with aiohttp.ClientSession() as session, session.ws_connect(
        f"ws://127.0.0.1:{AGENT_PORT}/", heartbeat=None, compress=0
    ) as ws:
        question = {"query": "How fast can you build it?", "session_id": session_id, "user_ip": None}
        await ws.send_str(json.dumps(question))
        async for frame in ws:
            event = json.loads(frame.data)
            if event["event"] == "RunContent":
                chat.token(event["content"])
            elif event["event"] == "RunCompleted":
                chat.done = event["content"] == chat.text
                break
    return chat


RELAY_PATHS = {"relay": "/api/chat/stream", "floor": "/bench/minimal-relay"}


async def relay_chat(start: asyncio.Event, session: aiohttp.ClientSession, session_id: str, url: str) -> Chat:
    chat = Chat()
    body = {"sessionId": session_id, "message": "How fast can you build it?"}
    await start.wait()
    chat.started = time.perf_counter()
    async with session.post(url, json=body, headers={"X-Chat-Api-Key": CHAT_KEY}) as response:
        if response.status != 200:
            raise BenchError(f"relay answered {response.status}: {await response.text()}")
        buffer = b""
        async for chunk in response.content.iter_any():
            buffer += chunk
            *blocks, buffer = buffer.split(b"\n\n")
            for block in blocks:
                lines = dict(line.split(": ", 1) for line in block.decode().split("\n") if not line.startswith(":"))
                if lines.get("event") == "token":
                    chat.token(json.loads(lines["data"])["content"])
                elif lines.get("event") == "done":
                    chat.done = json.loads(lines["data"])["content"] == chat.text
                elif lines.get("event") == "error":
                    raise BenchError(f"relay error event: {lines['data']}")
    return chat


def http_session() -> aiohttp.ClientSession:
    # A new connection per chat, as each visitor's browser opens one.
    connector = aiohttp.TCPConnector(limit=0, force_close=True)
    return aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=300))


async def phase(kind: str, round_number: int, port: int | None = None) -> tuple[list[Chat], list[str]]:
    """--chats chats of `kind` started at the same instant (relay kinds on daphne at `port`)."""
    prefix = f"bench-{kind}-{round_number}-{uuid.uuid4().hex[:6]}"
    session_ids = [f"{prefix}-{index}" for index in range(ARGS.chats)]
    start = asyncio.Event()
    async with http_session() as session:
        if kind == "direct":
            tasks = [asyncio.create_task(direct_chat(start, sid)) for sid in session_ids]
        else:
            url = f"http://127.0.0.1:{port or WEB_PORT}{RELAY_PATHS.get(kind, RELAY_PATHS['relay'])}"
            tasks = [asyncio.create_task(relay_chat(start, session, sid, url)) for sid in session_ids]
        await asyncio.sleep(0.2)  # every client waiting on the start line
        began = time.perf_counter()
        start.set()
        chats = await asyncio.gather(*tasks)
        wall = time.perf_counter() - began
    print(f"  {kind:6} round {round_number}: {len(chats)} chats in {wall:.2f} s", flush=True)
    return chats, session_ids


def arrivals() -> list[float]:
    """When each chat of the open loop starts (seconds from its start): a Poisson process at --open-rate."""
    rng, at, times = random.Random(ARGS.seed), 0.0, []
    while (at := at + rng.expovariate(ARGS.open_rate)) < ARGS.open_seconds:
        times.append(at)
    return times


async def open_loop(kinds: tuple[str, ...]) -> list[tuple[str, Chat, Chat, str]]:
    """Chats arriving at --open-rate a second for --open-seconds: each arrival a chat through the web process, of
    `kinds` in turn (relay, floor), and a direct chat started with it; (kind, that chat, its direct chat, its
    session id) per arrival."""
    prefix = f"bench-open-{'-'.join(kinds)}-{uuid.uuid4().hex[:6]}"
    started = asyncio.Event()
    started.set()
    loop = asyncio.get_running_loop()
    arrived = []
    async with http_session() as session:
        began = loop.time()
        for index, at in enumerate(arrivals()):
            await asyncio.sleep(max(0.0, began + at - loop.time()))
            kind, session_id = kinds[index % len(kinds)], f"{prefix}-{index}"
            url = f"http://127.0.0.1:{WEB_PORT}{RELAY_PATHS[kind]}"
            chat = asyncio.create_task(relay_chat(started, session, session_id, url))
            direct = asyncio.create_task(direct_chat(started, f"{prefix}-direct-{index}"))
            arrived.append((kind, chat, direct, session_id))
        chats = await asyncio.gather(*(chat for _, chat, _, _ in arrived))
        directs = await asyncio.gather(*(direct for _, _, direct, _ in arrived))
    print(f"  open loop: {len(chats)} {' and '.join(kinds)} chats, each beside a direct chat, "
          f"in {loop.time() - began:.1f} s", flush=True)  # fmt: skip
    return [(kind, chat, direct, sid) for (kind, _, _, sid), chat, direct in zip(arrived, chats, directs, strict=True)]


def incomplete(chats) -> bool:
    """Whether any of `chats` ended without its `done` or with fewer deltas than the agent sends."""
    return any(not chat.done or chat.tokens != ARGS.tokens for chat in chats)


def check_saved(chats: list[Chat], session_ids: list[str]) -> dict:
    """Every chat complete, and in the database once: its question and one complete answer with the full text."""
    count = len(session_ids)
    unfinished = sum(not chat.done or chat.tokens != ARGS.tokens for chat in chats)
    expected = "".join(f"t{index:03d} " for index in range(ARGS.tokens))
    time.sleep(0.5)  # the answer is saved before `done` is sent; this is slack for the check only
    rows = ChatMessage.objects.filter(session__session_id__in=session_ids)
    answers = rows.filter(role="assistant")
    per_session = {}
    for session_id, content, state in answers.values_list("session__session_id", "content", "state"):
        per_session.setdefault(session_id, []).append((content, state))
    problems = {
        "incomplete_chats": unfinished,
        "questions_saved": rows.filter(role="user").count(),
        "answers_saved": answers.count(),
        "sessions_without_exactly_one_answer": sum(len(per_session.get(sid, [])) != 1 for sid in session_ids),
        "answers_not_complete_or_wrong": sum(
            (content, state) != (expected, "complete") for saved in per_session.values() for content, state in saved
        ),
    }
    ok = (
        problems["incomplete_chats"] == 0
        and problems["questions_saved"] == count
        and problems["answers_saved"] == count
        and problems["sessions_without_exactly_one_answer"] == 0
        and problems["answers_not_complete_or_wrong"] == 0
    )
    return {**problems, "ok": ok}


def summary(chats: list[Chat]) -> dict:
    ttft = [chat.ttft * 1000 for chat in chats]
    rates = [chat.rate for chat in chats]
    whole = [chat.answer_seconds for chat in chats]
    return {
        "answer_s_p50": round(percentile(whole, 50), 2),  # request to last token: reported, not a target
        "answer_s_p99": round(percentile(whole, 99), 2),
        "ttft_ms_p50": round(percentile(ttft, 50), 1),
        "ttft_ms_p99": round(percentile(ttft, 99), 1),
        "tokens_per_s_p50": round(percentile(rates, 50), 1),
        "tokens_per_s_p1": round(percentile(rates, 1), 1),
    }


def versus(base: dict, other: dict) -> dict:
    """Ratios where 1.0 is as good as `base` (time to first token: base / other)."""
    return {
        "ttft_p50": round(base["ttft_ms_p50"] / other["ttft_ms_p50"], 3),
        "ttft_p99": round(base["ttft_ms_p99"] / other["ttft_ms_p99"], 3),
        "tokens_per_s_p50": round(other["tokens_per_s_p50"] / base["tokens_per_s_p50"], 3),
        "tokens_per_s_p1": round(other["tokens_per_s_p1"] / base["tokens_per_s_p1"], 3),
    }


def checked(chats: list[Chat], session_ids: list[str], checks: list) -> None:
    check = check_saved(chats, session_ids)
    checks.append(check)
    if not check["ok"]:
        raise BenchError(f"saved answers do not match: {check}")


def open_loop_phase(daphne, agent, kinds: tuple[str, ...] = ("relay",)) -> dict:
    meter = CpuMeter(groups={"daphne": [daphne.pid], "agent": [agent.pid]})
    before = meter.sample()
    arrived = asyncio.run(open_loop(kinds))
    cpu = meter.per_unit(before, meter.sample(), len(arrived))
    if incomplete(chat for _, through, beside, _ in arrived for chat in (through, beside)):
        raise BenchError("a chat of the open loop did not complete")
    result = {"rate_per_s": ARGS.open_rate, "seconds": ARGS.open_seconds, "chats": len(arrived)}
    checks = []
    for kind in kinds:
        chats, directs, session_ids = zip(*((c, d, sid) for k, c, d, sid in arrived if k == kind), strict=True)
        if kind == "relay":
            checked(chats, list(session_ids), checks)
        ours, direct = summary(chats), summary(directs)
        added = [(chat.ttft - beside.ttft) * 1000 for chat, beside in zip(chats, directs, strict=True)]
        result[kind] = {
            "chats": len(chats),
            "summary": ours,
            "direct": direct,
            # How much later its slowest 1 % see their first token than the direct clients started with them.
            "added_ttft_ms_p50": round(ours["ttft_ms_p50"] - direct["ttft_ms_p50"], 1),
            "added_ttft_ms_p99": round(ours["ttft_ms_p99"] - direct["ttft_ms_p99"], 1),
            # For reference: the same, chat by chat (each against the direct one that started with it).
            "paired_added_ttft_ms_p50": round(percentile(added, 50), 1),
            "paired_added_ttft_ms_p99": round(percentile(added, 99), 1),
        }
    result["cpu_us_per_chat"] = cpu  # daphne: per chat through it; agent: direct chats included
    result["checks"] = checks
    return result


def launch(processes: int, env: dict):
    """The launcher serving `processes` web processes on a port of its own; (process, port)."""
    port = free_port()
    launcher_env = {**env, "PORT": str(port), "BIND_HOST": "127.0.0.1", "WEB_PROCESSES": str(processes),
                    "WEB_LOG_FILE": "/dev/fd/1", "WEB_LOG_SYSLOG": "false"}  # fmt: skip
    process = start_process(f"web-{processes}", shlex.split(ARGS.launcher), env=launcher_env, out_dir=OUT_DIR)
    return process, port


def scaled_phase(env: dict) -> dict:
    """The relay burst against the launcher with --scale-processes processes and with one, rounds alternating;
    the floor's burst through the same launchers beside it: how far a relay with nothing of ours scales out on
    this host, where the agent and the clients share the cores with the web processes."""
    many = ARGS.scale_processes
    launchers = {1: launch(1, env), many: launch(many, env)}
    results, floors, checks = {1: [], many: []}, {1: [], many: []}, []
    try:
        for process, port in launchers.values():
            wait_http(process, f"http://127.0.0.1:{port}/healthz")
        for count, (_, port) in launchers.items():  # every process warm: one burst reaches all of them
            asyncio.run(phase(f"web-{count}", 0, port))
            asyncio.run(phase("floor", 0, port))
        for round_number in range(1, ARGS.rounds + 1):
            order = (1, many) if round_number % 2 else (many, 1)
            for count in order:
                chats, session_ids = asyncio.run(phase(f"web-{count}", round_number, launchers[count][1]))
                checked(chats, session_ids, checks)
                results[count].extend(chats)
                chats, _ = asyncio.run(phase("floor", round_number, launchers[count][1]))
                if incomplete(chats):
                    raise BenchError("a floor chat did not complete")
                floors[count].extend(chats)
    finally:
        for process, _ in launchers.values():
            stop_process(process)
    one, scaled = summary(results[1]), summary(results[many])
    floor_one, floor_scaled = summary(floors[1]), summary(floors[many])
    ratio = round(scaled["ttft_ms_p50"] / one["ttft_ms_p50"], 3)
    return {"launcher": ARGS.launcher, "processes": many, "one_process": one, f"{many}_processes": scaled,
            "ttft_p50_ratio": ratio, "floor_one_process": floor_one, f"floor_{many}_processes": floor_scaled,
            "floor_ttft_p50_ratio": round(floor_scaled["ttft_ms_p50"] / floor_one["ttft_ms_p50"], 3),
            "checks": checks, "target_met": ratio <= ARGS.scale_target}  # fmt: skip


def main():
    check_services()
    call_command("migrate", verbosity=0, interactive=False)
    env = {**os.environ, **BENCH_ENV}
    agent = start_process(
        "agent",
        [sys.executable, "-m", "standins.agent", "--port", str(AGENT_PORT), "--tokens", str(ARGS.tokens),
         "--interval-ms", str(ARGS.interval_ms)],
        env=env, out_dir=OUT_DIR,
    )  # fmt: skip
    daphne = start_process(  # the web process as the Procfile's launcher runs each: daphne through config.serve
        "daphne",
        [sys.executable, "-m", "config.serve", "-b", "127.0.0.1", "-p", str(WEB_PORT), "config.asgi:application"],
        env=env, out_dir=OUT_DIR,
    )
    machine = machine_info(daphne=__import__("daphne").__version__, aiohttp=aiohttp.__version__)
    try:
        wait_http(daphne, f"http://127.0.0.1:{WEB_PORT}/healthz")
        time.sleep(0.5)
        # Warm both paths (connections, the pool, imports) before anything is measured.
        asyncio.run(phase("direct", 0))
        asyncio.run(phase("relay", 0))
        asyncio.run(phase("floor", 0))
        results = {"direct": [], "relay": [], "floor": [], "checks": [],
                   "cpu_us_per_chat": {"direct": [], "relay": [], "floor": []}}  # fmt: skip
        meter = CpuMeter(groups={"daphne": [daphne.pid], "agent": [agent.pid]})
        for round_number in range(1, ARGS.rounds + 1):
            order = ("direct", "relay", "floor") if round_number % 2 else ("floor", "relay", "direct")
            for kind in order:
                before = meter.sample()
                chats, session_ids = asyncio.run(phase(kind, round_number))
                results["cpu_us_per_chat"][kind].append(meter.per_unit(before, meter.sample(), len(chats)))
                results[kind].extend(chats)
                if kind == "relay":
                    checked(chats, session_ids, results["checks"])
                elif incomplete(chats):
                    raise BenchError(f"a {kind} chat did not complete")
        opened = open_loop_phase(daphne, agent) if ARGS.open_seconds > 0 else None
        if opened:
            # The target: the relay's time to first token p99 over the direct clients'.
            opened["target_met"] = opened["relay"]["added_ttft_ms_p99"] < ARGS.open_added_ms
        if opened and ARGS.open_floor:
            mixed = opened["relay_and_floor"] = open_loop_phase(daphne, agent, ("relay", "floor"))
            # What is ours in the added time: the relay's time to first token over the floor's, the same minute.
            opened["added_over_floor_ms"] = {
                q: round(mixed["relay"]["summary"][f"ttft_ms_{q}"] - mixed["floor"]["summary"][f"ttft_ms_{q}"], 1)
                for q in ("p50", "p99")
            }
        stop_process(daphne)  # idle from here on, but out of the way
        scaled = scaled_phase(env) if ARGS.scale_processes > 0 else None
    finally:
        stop_process(daphne)
        stop_process(agent)

    direct, relay, floor = (summary(results[kind]) for kind in ("direct", "relay", "floor"))
    ratios = versus(floor, relay)
    cpu = {kind: sum(phase["daphne"] for phase in results["cpu_us_per_chat"][kind]) for kind in ("relay", "floor")}
    cpu_ratio = round(cpu["relay"] / cpu["floor"], 3)
    burst_met = all(value >= ARGS.target for value in ratios.values()) and cpu_ratio <= ARGS.cpu_target
    met = burst_met and (opened is None or opened["target_met"]) and (scaled is None or scaled["target_met"])
    report = {
        "machine": machine,
        "parameters": vars(ARGS) | {"results": str(ARGS.results)},
        "direct": direct,
        "relay": relay,
        "floor": floor,
        "ratios_relay_vs_floor": ratios,  # the targets, with cpu_relay_vs_floor
        "cpu_relay_vs_floor": cpu_ratio,
        "ratios_relay_vs_direct": versus(direct, relay),
        "ratios_floor_vs_direct": versus(direct, floor),
        "burst_targets_met": burst_met,
        "checks": results["checks"],
        # CPU per chat (µs) of each part, and of the rest of the machine (other tenants), per phase.
        "cpu_us_per_chat": results["cpu_us_per_chat"],
        "open_loop": opened,
        "scaled": scaled,
        "targets_met": met,
    }
    ARGS.results.write_text(json.dumps(report, indent=2) + "\n")
    brief = {key: report[key] for key in ("direct", "relay", "floor", "ratios_relay_vs_floor", "cpu_relay_vs_floor",
                                          "ratios_relay_vs_direct", "burst_targets_met")}  # fmt: skip
    if opened:
        brief["open_loop"] = {key: value for key, value in opened.items() if key not in ("checks", "cpu_us_per_chat")}
        if mixed := brief["open_loop"].get("relay_and_floor"):
            brief["open_loop"]["relay_and_floor"] = {key: mixed[key] for key in ("relay", "floor")}
    if scaled:
        brief["scaled"] = {key: value for key, value in scaled.items() if key != "checks"}
    print(json.dumps({**brief, "targets_met": met}, indent=2))
    return 0 if met else 1


if __name__ == "__main__":
    run(main, "chat")
