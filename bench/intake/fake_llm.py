"""A fake OpenAI-compatible chat-completions server for the intake benchmark.

    .venv/bin/python bench/intake/fake_llm.py --port PORT [--delay-ms 0]

`POST /v1/chat/completions` answers a `chat.completion` object whose message
content is `{"category": "lead", "confidence": 0.9, "reasoning": "..."}`
after the configured delay (an asyncio sleep: any number of requests wait in
parallel, like a real upstream). Control endpoints for the bench:

- `POST /_control` with `{"delay_ms": 300}` changes the delay;
- `GET /_stats` returns `{"requests", "max_inflight", "inflight", "delay_ms"}`;
  `POST /_stats/reset` zeroes the counters.

aiohttp (requirements-bench.txt); one process, one event loop, no threads.
"""

import argparse
import asyncio
import json
import time

from aiohttp import web

VERDICT = json.dumps({"category": "lead", "confidence": 0.9, "reasoning": "Asks for help with a software project."})


class State:
    def __init__(self, delay_ms: float):
        self.delay = delay_ms / 1000
        self.requests = 0
        self.inflight = 0
        self.max_inflight = 0


async def completions(request: web.Request) -> web.Response:
    state: State = request.app["state"]
    state.inflight += 1
    state.max_inflight = max(state.max_inflight, state.inflight)
    try:
        body = await request.json()
        if state.delay:
            await asyncio.sleep(state.delay)
        state.requests += 1
        return web.json_response(
            {
                "id": f"chatcmpl-bench{state.requests}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model", "bench-model"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": VERDICT, "refusal": None, "annotations": []},
                        "logprobs": None,
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 412, "completion_tokens": 38, "total_tokens": 450},
                "service_tier": "default",
                "system_fingerprint": "fp_bench",
            }
        )
    finally:
        state.inflight -= 1


async def control(request: web.Request) -> web.Response:
    state: State = request.app["state"]
    body = await request.json()
    state.delay = float(body["delay_ms"]) / 1000
    return web.json_response({"delay_ms": state.delay * 1000})


async def stats(request: web.Request) -> web.Response:
    state: State = request.app["state"]
    return web.json_response(
        {
            "requests": state.requests,
            "inflight": state.inflight,
            "max_inflight": state.max_inflight,
            "delay_ms": state.delay * 1000,
        }
    )


async def stats_reset(request: web.Request) -> web.Response:
    state: State = request.app["state"]
    state.requests = 0
    state.max_inflight = state.inflight
    return web.json_response({"ok": True})


def make_app(delay_ms: float) -> web.Application:
    app = web.Application(client_max_size=1024 * 1024)
    app["state"] = State(delay_ms)
    app.router.add_post("/v1/chat/completions", completions)
    app.router.add_post("/_control", control)
    app.router.add_get("/_stats", stats)
    app.router.add_post("/_stats/reset", stats_reset)
    return app


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--delay-ms", type=float, default=0.0)
    args = parser.parse_args()
    # backlog: 100+ clients may connect at once when the bench starts a phase.
    web.run_app(make_app(args.delay_ms), host=args.host, port=args.port, backlog=1024, access_log=None,
                print=None, handle_signals=True)  # fmt: skip


if __name__ == "__main__":
    main()
