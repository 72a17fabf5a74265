"""A fake CRM webhook receiver for the sync benchmark.

    .venv/bin/python bench/tracking/sync/fake_crm.py --port PORT [--delay-ms 50]

`POST /profiles` answers 204 after the delay (an asyncio sleep: any number of
deliveries wait in parallel, like a real receiver). `GET /_stats` returns
`{"requests", "distinct_ids", "max_inflight"}`, counted by `webhook-id` so a
repeated delivery shows; `POST /_stats/reset` zeroes them.

aiohttp (requirements-bench.txt); one process, one event loop.
"""

import argparse
import asyncio

from aiohttp import web


class State:
    def __init__(self, delay_ms: float):
        self.delay = delay_ms / 1000
        self.reset()

    def reset(self):
        self.requests = 0
        self.ids = set()
        self.inflight = 0
        self.max_inflight = 0


async def profiles(request: web.Request) -> web.Response:
    state: State = request.app["state"]
    state.inflight += 1
    state.max_inflight = max(state.max_inflight, state.inflight)
    try:
        await request.read()
        await asyncio.sleep(state.delay)
        state.requests += 1
        state.ids.add(request.headers.get("webhook-id"))
        return web.Response(status=204)
    finally:
        state.inflight -= 1


async def stats(request: web.Request) -> web.Response:
    state: State = request.app["state"]
    return web.json_response(
        {"requests": state.requests, "distinct_ids": len(state.ids), "max_inflight": state.max_inflight}
    )


async def reset(request: web.Request) -> web.Response:
    request.app["state"].reset()
    return web.json_response({})


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--delay-ms", type=float, default=50)
    args = parser.parse_args()
    app = web.Application()
    app["state"] = State(args.delay_ms)
    app.add_routes([web.post("/profiles", profiles), web.get("/_stats", stats), web.post("/_stats/reset", reset)])
    web.run_app(app, host="127.0.0.1", port=args.port, access_log=None, print=None)


if __name__ == "__main__":
    main()
