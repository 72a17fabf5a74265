"""A local CRM webhook receiver for lead profiles (CRM_WEBHOOK_URL) that verifies each delivery as the
Standard Webhooks spec asks a receiver to (standardwebhooks.com), with the spec's own library.

`POST /profiles` answers 204 after `delay_ms` (an asyncio sleep: any number of deliveries wait in parallel,
as at a real receiver) when the `webhook-signature` verifies against the signing secret for the
`webhook-id`, `webhook-timestamp` (within five minutes) and body; otherwise 401. Without a secret it takes
deliveries unsigned. Each delivery is recorded with `detail["signature"]` ("valid", "invalid" or "unsigned") and
`detail["answered"]`, the status it got; `failures` queues statuses for the next deliveries (a test's knob).

For the benchmarks: `GET /_stats` answers `{"requests", "distinct_ids", "max_inflight"}`, counted by
`webhook-id` so a repeated delivery shows; `POST /_stats/reset` zeroes them.

    python -m standins.crm_receiver --port 8772 [--delay-ms 50] [--signing-secret whsec_...]
"""

import argparse
import asyncio
import json
from collections.abc import Sequence

from aiohttp import web
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from standins.base import Received
from standins.serving import AiohttpStandIn

# The example secret of the Standard Webhooks specification.
SIGNING_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


class CrmReceiver(AiohttpStandIn):
    name = "crm"

    def __init__(
        self, *, signing_secret: str = SIGNING_SECRET, delay_ms: float = 0.0, host: str = "127.0.0.1", port: int = 0
    ):
        super().__init__(host=host, port=port)
        self.signing_secret = signing_secret
        self._webhook = Webhook(signing_secret) if signing_secret else None
        self.delay = delay_ms / 1000
        self.profiles: list[dict] = []  # the verified (or unsigned) deliveries' bodies, in order
        self.failures: list[int] = []  # statuses answered to the next deliveries instead of 204 (a test's knob)
        self.stats_reset()

    @property
    def url(self) -> str:
        return f"{self.origin}/profiles"

    def settings(self) -> dict[str, str]:
        return {"CRM_WEBHOOK_URL": self.url, "CRM_SIGNING_SECRET": self.signing_secret}

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/profiles", self.deliver)
        app.router.add_get("/_stats", self.stats)
        app.router.add_post("/_stats/reset", self.reset)

    def stats_reset(self) -> None:
        self.requests = 0
        self.ids: set[str | None] = set()
        self.inflight = 0
        self.max_inflight = 0

    async def deliver(self, request: web.Request) -> web.Response:
        self.inflight += 1
        self.max_inflight = max(self.max_inflight, self.inflight)
        try:
            body = await request.read()
            webhook_id = request.headers.get("webhook-id")
            signature, problem = self._verify(body, request.headers)
            detail = {"signature": signature, "webhook-id": webhook_id,
                      "webhook-timestamp": request.headers.get("webhook-timestamp")}  # fmt: skip
            if problem:
                detail["problem"] = problem
            try:
                profile = json.loads(body)
            except ValueError:
                profile = None
            if signature == "invalid":
                status = 401
            else:
                await asyncio.sleep(self.delay)
                status = self.failures.pop(0) if self.failures else 204
            detail["answered"] = status
            self.record(Received(self.name, "delivery", _title(profile, webhook_id), body=_pretty(profile, body),
                                 detail=detail))  # fmt: skip
            if status == 401:
                return web.json_response({"error": problem}, status=401)
            if status != 204:
                return web.Response(status=status)
            self.requests += 1
            self.ids.add(webhook_id)
            self.profiles.append(profile)
            return web.Response(status=204)
        finally:
            self.inflight -= 1

    def _verify(self, body: bytes, headers) -> tuple[str, str]:
        if self._webhook is None:
            return "unsigned", ""
        try:
            self._webhook.verify(body, dict(headers), json_parse=False)
        except (WebhookVerificationError, ValueError) as exc:  # ValueError: a header or body that does not parse
            return "invalid", str(exc) or type(exc).__name__
        return "valid", ""

    async def stats(self, request: web.Request) -> web.Response:
        return web.json_response(
            {"requests": self.requests, "distinct_ids": len(self.ids), "max_inflight": self.max_inflight}
        )

    async def reset(self, request: web.Request) -> web.Response:
        self.stats_reset()
        return web.json_response({})


def _title(profile, webhook_id: str | None) -> str:
    if isinstance(profile, dict):
        identity = profile.get("identity") if isinstance(profile.get("identity"), dict) else {}
        return str(identity.get("email") or profile.get("sub") or webhook_id)
    return str(webhook_id)


def _pretty(profile, body: bytes) -> str:
    return json.dumps(profile, indent=2) if profile is not None else body.decode(errors="replace")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="A local CRM webhook receiver that verifies each delivery.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8772)
    parser.add_argument("--delay-ms", type=float, default=0.0)
    parser.add_argument("--signing-secret", default=SIGNING_SECRET, help="whsec_…; empty: deliveries unsigned")
    args = parser.parse_args(argv)
    receiver = CrmReceiver(signing_secret=args.signing_secret, delay_ms=args.delay_ms, host=args.host, port=args.port)
    receiver.serve_until_signalled()


if __name__ == "__main__":
    main()
