"""The benchmark's agent: an Agno-style WebSocket agent that streams `--tokens` deltas, one every `--interval-ms`.

    python bench/chat/fake_agent.py --port 8765 --tokens 300 --interval-ms 5

Each delta is due at connection start + (i + 1) × interval, so a late send does not
push back the ones after it (the agent's pace, not its sleep overhead, is the rate).
"""

import argparse
import asyncio
import json

from websockets.asyncio.server import serve


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--tokens", type=int, default=300)
    parser.add_argument("--interval-ms", type=float, default=5.0)
    args = parser.parse_args()
    interval = args.interval_ms / 1000

    async def answer(websocket):
        request = json.loads(await websocket.recv())
        loop = asyncio.get_running_loop()
        started = loop.time()
        base = {"run_id": request["session_id"], "session_id": request["session_id"], "agent_id": "bench"}
        await websocket.send(json.dumps({"event": "RunStarted", **base}))
        tokens = [f"t{index:03d} " for index in range(args.tokens)]
        for index, token in enumerate(tokens):
            delay = started + (index + 1) * interval - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            await websocket.send(json.dumps({"event": "RunContent", "content": token, **base}))
        await websocket.send(
            json.dumps({"event": "RunCompleted", "content": "".join(tokens), "metadata": {"bench": True}, **base})
        )

    async def run():
        async with serve(answer, "127.0.0.1", args.port, compression=None, ping_interval=None, backlog=1024):
            print("ready", flush=True)
            await asyncio.Future()

    asyncio.run(run())


if __name__ == "__main__":
    main()
