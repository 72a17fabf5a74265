"""A local reCAPTCHA v3 that verifies tokens as Google's siteverify does (developers.google.com/recaptcha/docs/verify
and /docs/v3).

`POST /recaptcha/api/siteverify` with form fields `secret`, `response` (the token) and optional `remoteip`
answers `{"success": true, "score", "action", "challenge_ts", "hostname"}`, or `{"success": false,
"error-codes": [...]}`: `missing-input-secret`/`invalid-input-secret` for the secret,
`missing-input-response` for no token, `timeout-or-duplicate` for a token verified before. Any other
non-empty token passes with `score` (0.9) for `action` on the first of `hostnames`; `error_codes`, when set,
fails every verification with them.

`GET /recaptcha/api.js` stands in for Google's script: `grecaptcha.ready` and `grecaptcha.execute(siteKey,
{action})`, whose token carries the action and the page's hostname, which siteverify then answers, as
Google's tokens do.

    python -m standins.recaptcha --port 8771 [--score 0.3]
"""

import argparse
import base64
import binascii
import json
from collections.abc import Sequence
from datetime import UTC, datetime

from aiohttp import web

from standins.base import Received
from standins.serving import AiohttpStandIn

SECRET_KEY = "standin-recaptcha-secret"
SITE_KEY = "standin-recaptcha-site-key"
_MINTED = "standin."  # the start of every token _SCRIPT makes
_SCRIPT = """window.grecaptcha = {
  ready(callback) { callback(); },
  execute(siteKey, options) {
    const claims = btoa(JSON.stringify({ action: (options || {}).action || "", hostname: location.hostname }));
    return Promise.resolve("standin." + claims + "." + Date.now() + Math.random().toString(36).slice(2));
  },
};
"""


class Recaptcha(AiohttpStandIn):
    name = "recaptcha"

    def __init__(
        self,
        *,
        secret_key: str = SECRET_KEY,
        site_key: str = SITE_KEY,
        score: float = 0.9,
        action: str = "lead_form",
        hostnames: Sequence[str] = ("localhost", "127.0.0.1"),
        error_codes: Sequence[str] = (),
        host: str = "127.0.0.1",
        port: int = 0,
    ):
        super().__init__(host=host, port=port)
        self.secret_key, self.site_key = secret_key, site_key
        self.score, self.action, self.hostnames = score, action, tuple(hostnames)
        self.error_codes = tuple(error_codes)
        self.verified: set[str] = set()

    @property
    def verify_url(self) -> str:
        return f"{self.origin}/recaptcha/api/siteverify"

    def settings(self) -> dict[str, str]:
        return {
            "RECAPTCHA_VERIFY_URL": self.verify_url,
            "RECAPTCHA_SECRET_KEY": self.secret_key,
            "RECAPTCHA_SITE_KEY": self.site_key,
            "RECAPTCHA_HOSTNAMES": ",".join(self.hostnames),
            "RECAPTCHA_SCRIPT_URL": f"{self.origin}/recaptcha/api.js",
        }

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/recaptcha/api/siteverify", self.siteverify)
        app.router.add_get("/recaptcha/api.js", self.script)

    async def script(self, request: web.Request) -> web.Response:
        return web.Response(text=_SCRIPT, content_type="text/javascript")

    async def siteverify(self, request: web.Request) -> web.Response:
        form = await request.post()
        token = str(form.get("response") or "")
        answer = self._answer(str(form.get("secret") or ""), token)
        title = (
            f"score {answer['score']} for {answer['action']!r} on {answer['hostname']}"
            if answer["success"]
            else "refused: " + ", ".join(answer["error-codes"])
        )
        self.record(Received(self.name, "verification", title, detail={**answer, "remoteip": form.get("remoteip")}))
        return web.json_response(answer)

    def _answer(self, secret: str, token: str) -> dict:
        errors = []
        if not secret:
            errors.append("missing-input-secret")
        elif secret != self.secret_key:
            errors.append("invalid-input-secret")
        if not token:
            errors.append("missing-input-response")
        elif token in self.verified:
            errors.append("timeout-or-duplicate")
        errors = errors or list(self.error_codes)
        if errors:
            return {"success": False, "error-codes": errors}
        self.verified.add(token)
        claims = _claims(token)
        return {
            "success": True,
            "score": self.score,
            "action": claims.get("action", self.action),
            "challenge_ts": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "hostname": claims.get("hostname", self.hostnames[0] if self.hostnames else ""),
        }


def _claims(token: str) -> dict:
    """What a token minted by the stand-in's script says it was made for; {} for any other token."""
    if not token.startswith(_MINTED):
        return {}
    try:
        claims = json.loads(base64.b64decode(token[len(_MINTED) :].split(".", 1)[0]))
    except (binascii.Error, ValueError):
        return {}
    if not isinstance(claims, dict):
        return {}
    return {key: str(value) for key, value in claims.items() if key in ("action", "hostname")}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="A local reCAPTCHA v3 siteverify that passes every fresh token.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8771)
    parser.add_argument("--secret-key", default=SECRET_KEY)
    parser.add_argument("--site-key", default=SITE_KEY)
    parser.add_argument("--score", type=float, default=0.9, help="the score every token gets")
    args = parser.parse_args(argv)
    recaptcha = Recaptcha(secret_key=args.secret_key, site_key=args.site_key, score=args.score, host=args.host,
                          port=args.port)  # fmt: skip
    recaptcha.serve_until_signalled()


if __name__ == "__main__":
    main()
