"""The chat relay against a direct WebSocket client of the same fake agent, side by side in one run.

    scripts/with-services .venv/bin/python bench/chat/run.py [--chats 200] [--tokens 300] [--rounds 2]

One daphne process serves POST /api/chat/stream (config.asgi:application, the
production settings) in front of the agent stand-in (standins/agent.py), which streams
--tokens deltas --interval-ms apart per answer. Phases alternate:

  direct: --chats WebSocket clients at once, straight to the fake agent (the
          same websockets options our relay uses);
  relay:  --chats HTTP clients at once, each POSTing one message to the relay
          and reading its SSE answer;
  floor:  the same through a minimal async Django view on the same daphne
          (bench/chat/floor.py: no key, no throttle, no database), to show what
          any relay through one process costs.

Per chat: time to first token (from just before connecting to the first delta)
and tokens per second (deltas after the first / time from the first delta to
the last). Reported: p50 and p99 of time to first token, p50 and p1 (the
slowest 1 %) of tokens per second. Targets: relay / direct >= --target (0.9)
for each (for time to first token, direct / relay); the floor's ratios are
reported beside them. After each relay phase every
answer is checked in PostgreSQL: each chat has its user message and exactly
one complete assistant message with the full text.

Exit status: 0 targets met, 1 a target missed, 2 a check failed or the bench could not run.
"""

import argparse
import asyncio
import json
import os
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
    parser.add_argument("--rounds", type=int, default=2, help="direct + relay rounds, order alternating (default 2)")
    parser.add_argument("--target", type=float, default=0.9, help="relay / direct target (default 0.9)")
    return parser.parse_args()


ARGS = parse_args()
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
import websockets  # noqa: E402
from django.core.management import call_command  # noqa: E402
from websockets.asyncio.client import connect  # noqa: E402

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
    # As integrations.agent connects: no compression, no keepalive pings.
    async with connect(f"ws://127.0.0.1:{AGENT_PORT}/", compression=None, ping_interval=None, open_timeout=60) as ws:
        await ws.send(json.dumps({"query": "How fast can you build it?", "session_id": session_id, "user_ip": None}))
        async for frame in ws:
            event = json.loads(frame)
            if event["event"] == "RunContent":
                chat.token(event["content"])
            elif event["event"] == "RunCompleted":
                chat.done = event["content"] == chat.text
                break
    return chat


RELAY_PATHS = {"relay": "/api/chat/stream", "floor": "/bench/minimal-relay"}


async def relay_chat(start: asyncio.Event, session: aiohttp.ClientSession, session_id: str, path: str) -> Chat:
    chat = Chat()
    body = {"sessionId": session_id, "message": "How fast can you build it?"}
    await start.wait()
    chat.started = time.perf_counter()
    async with session.post(
        f"http://127.0.0.1:{WEB_PORT}{path}", json=body, headers={"X-Chat-Api-Key": CHAT_KEY}
    ) as response:
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


async def phase(kind: str, round_number: int) -> tuple[list[Chat], list[str]]:
    prefix = f"bench-{kind}-{round_number}-{uuid.uuid4().hex[:6]}"
    session_ids = [f"{prefix}-{index}" for index in range(ARGS.chats)]
    start = asyncio.Event()
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=300)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        if kind == "direct":
            tasks = [asyncio.create_task(direct_chat(start, sid)) for sid in session_ids]
        else:
            path = RELAY_PATHS[kind]
            tasks = [asyncio.create_task(relay_chat(start, session, sid, path)) for sid in session_ids]
        await asyncio.sleep(0.2)  # every client waiting on the start line
        began = time.perf_counter()
        start.set()
        chats = await asyncio.gather(*tasks)
        wall = time.perf_counter() - began
    print(f"  {kind:6} round {round_number}: {len(chats)} chats in {wall:.2f} s", flush=True)
    return chats, session_ids


def check_saved(chats: list[Chat], session_ids: list[str]) -> dict:
    """Every chat complete, and in the database once: its question and one complete answer with the full text."""
    incomplete = sum(not chat.done or chat.tokens != ARGS.tokens for chat in chats)
    expected = "".join(f"t{index:03d} " for index in range(ARGS.tokens))
    time.sleep(0.5)  # the answer is saved before `done` is sent; this is slack for the check only
    rows = ChatMessage.objects.filter(session__session_id__in=session_ids)
    answers = rows.filter(role="assistant")
    per_session = {}
    for session_id, content, state in answers.values_list("session__session_id", "content", "state"):
        per_session.setdefault(session_id, []).append((content, state))
    problems = {
        "incomplete_chats": incomplete,
        "questions_saved": rows.filter(role="user").count(),
        "answers_saved": answers.count(),
        "sessions_without_exactly_one_answer": sum(len(per_session.get(sid, [])) != 1 for sid in session_ids),
        "answers_not_complete_or_wrong": sum(
            (content, state) != (expected, "complete") for saved in per_session.values() for content, state in saved
        ),
    }
    ok = (
        problems["incomplete_chats"] == 0
        and problems["questions_saved"] == ARGS.chats
        and problems["answers_saved"] == ARGS.chats
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


def vs_direct(direct: dict, other: dict) -> dict:
    """Ratios where 1.0 is as good as the direct client (time to first token: direct / other)."""
    return {
        "ttft_p50": round(direct["ttft_ms_p50"] / other["ttft_ms_p50"], 3),
        "ttft_p99": round(direct["ttft_ms_p99"] / other["ttft_ms_p99"], 3),
        "tokens_per_s_p50": round(other["tokens_per_s_p50"] / direct["tokens_per_s_p50"], 3),
        "tokens_per_s_p1": round(other["tokens_per_s_p1"] / direct["tokens_per_s_p1"], 3),
    }


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
    daphne = start_process(  # the web process as the Procfile runs it: daphne through config.serve
        "daphne",
        [sys.executable, "-m", "config.serve", "-b", "127.0.0.1", "-p", str(WEB_PORT), "config.asgi:application"],
        env=env, out_dir=OUT_DIR,
    )
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
                    check = check_saved(chats, session_ids)
                    results["checks"].append(check)
                    if not check["ok"]:
                        raise BenchError(f"saved answers do not match: {check}")
                elif any(not chat.done or chat.tokens != ARGS.tokens for chat in chats):
                    raise BenchError("a direct chat did not complete")
    finally:
        stop_process(daphne)
        stop_process(agent)

    direct, relay, floor = (summary(results[kind]) for kind in ("direct", "relay", "floor"))
    ratios, floor_ratios = vs_direct(direct, relay), vs_direct(direct, floor)
    met = all(value >= ARGS.target for value in ratios.values())
    report = {
        "machine": machine_info(daphne=__import__("daphne").__version__, websockets=websockets.__version__),
        "parameters": vars(ARGS),
        "direct": direct,
        "relay": relay,
        "floor": floor,
        "ratios_relay_vs_direct": ratios,
        "ratios_floor_vs_direct": floor_ratios,
        "checks": results["checks"],
        # CPU per chat (µs) of each part, and of the rest of the machine (other tenants), per phase.
        "cpu_us_per_chat": results["cpu_us_per_chat"],
        "targets_met": met,
    }
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({"direct": direct, "relay": relay, "floor": floor, "ratios": ratios,
                      "floor_ratios": floor_ratios, "targets_met": met}, indent=2))  # fmt: skip
    return 0 if met else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as exc:
        print(f"bench failed: {exc}", file=sys.stderr)
        sys.exit(2)
