"""A local OpenAI-compatible chat-completions gateway (a LiteLLM proxy, as LLM_BASE_URL names one) that
classifies every submission with the same verdict.

`POST /v1/chat/completions` with `Authorization: Bearer <key>` answers a `chat.completion` object (OpenAI's
API reference) whose message content is the verdict's JSON (`{"category", "confidence", "reasoning"}`), after
`delay_ms` (an asyncio sleep: any number of requests wait in parallel, as at a real upstream). Another key
answers 401 with OpenAI's error body.

For the benchmarks, which start it as a process of its own:

- `POST /_control` with `{"delay_ms": 300}` changes the delay;
- `GET /_stats` answers `{"requests", "max_inflight", "inflight", "delay_ms"}`; `POST /_stats/reset` zeroes them.

    python -m standins.llm --port 8770 [--delay-ms 0] [--api-key KEY]
"""

import argparse
import asyncio
import json
import time
from collections.abc import Sequence

from aiohttp import web

from standins.base import Received
from standins.serving import AiohttpStandIn

API_KEY = "standin-llm-key"
MODEL = "standin-classifier"
LEAD = {"category": "lead", "confidence": 0.9, "reasoning": "Asks for help with a software project."}


class Llm(AiohttpStandIn):
    name = "llm"

    def __init__(
        self,
        *,
        api_key: str = API_KEY,
        verdict: dict | None = None,
        delay_ms: float = 0.0,
        host: str = "127.0.0.1",
        port: int = 0,
    ):
        super().__init__(host=host, port=port)
        self.api_key = api_key
        self.verdict = verdict or LEAD
        self.delay = delay_ms / 1000
        self.requests = self.inflight = self.max_inflight = 0

    def settings(self) -> dict[str, str]:
        return {"LLM_BASE_URL": f"{self.origin}/v1", "LLM_API_KEY": self.api_key, "LLM_MODEL": MODEL}

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/chat/completions", self.completions)
        app.router.add_post("/_control", self.control)
        app.router.add_get("/_stats", self.stats)
        app.router.add_post("/_stats/reset", self.stats_reset)

    async def completions(self, request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != f"Bearer {self.api_key}":
            error = {"message": "Incorrect API key provided.", "type": "invalid_request_error", "param": None,
                     "code": "invalid_api_key"}  # fmt: skip
            return web.json_response({"error": error}, status=401)
        self.inflight += 1
        self.max_inflight = max(self.max_inflight, self.inflight)
        try:
            body = await request.json()
            if self.delay:
                await asyncio.sleep(self.delay)
            self.requests += 1
            submission = next((m.get("content", "") for m in body.get("messages", []) if m.get("role") == "user"), "")
            self.record(
                Received(self.name, "classification", f"{self.verdict['category']} ({self.verdict['confidence']})",
                         body=submission, detail={"model": body.get("model"), "verdict": self.verdict})
            )  # fmt: skip
            return web.json_response(
                {
                    "id": f"chatcmpl-standin{self.requests}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model", MODEL),
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": json.dumps(self.verdict), "refusal": None,
                                        "annotations": []},
                            "logprobs": None,
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {"prompt_tokens": 412, "completion_tokens": 38, "total_tokens": 450},
                    "service_tier": "default",
                    "system_fingerprint": "fp_standin",
                }
            )  # fmt: skip
        finally:
            self.inflight -= 1

    async def control(self, request: web.Request) -> web.Response:
        self.delay = float((await request.json())["delay_ms"]) / 1000
        return web.json_response({"delay_ms": self.delay * 1000})

    async def stats(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "requests": self.requests,
                "inflight": self.inflight,
                "max_inflight": self.max_inflight,
                "delay_ms": self.delay * 1000,
            }
        )

    async def stats_reset(self, request: web.Request) -> web.Response:
        self.requests = 0
        self.max_inflight = self.inflight
        return web.json_response({"ok": True})


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="A local OpenAI-compatible gateway: every submission is a lead.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8770)
    parser.add_argument("--api-key", default=API_KEY, help="the key it accepts")
    parser.add_argument("--delay-ms", type=float, default=0.0)
    args = parser.parse_args(argv)
    Llm(api_key=args.api_key, delay_ms=args.delay_ms, host=args.host, port=args.port).serve_until_signalled()


if __name__ == "__main__":
    main()
