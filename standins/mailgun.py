"""A local Mailgun that takes messages and answers their events as Mailgun does, as django-anymail calls it
(anymail/backends/mailgun.py; documentation.mailgun.com: Messages, Events).

`POST /v3/{domain}/messages` (form fields `from`, `to`, `cc`, `bcc`, `subject`, `text`, `html`, `h:<Header>`,
`o:tag`, files `attachment`/`inline`) answers `{"id": "<message-id>", "message": "Queued. Thank you."}`;
`GET /v3/{domain}/events?message-id=` answers `{"items": [{"event": "accepted", "message": {"headers":
{"message-id"}}}], "paging"}`. Basic auth with the user `api` and the key; another key answers 401
"Forbidden", another domain 404 "Domain not found", as Mailgun does.

`duplicates()` counts messages sent twice: by our Message-ID, else by recipients and subject.

    python -m standins.mailgun --port 8769
"""

import argparse
import time
import uuid
from collections.abc import Sequence

from aiohttp import BasicAuth, web

from standins.base import Received
from standins.serving import AiohttpStandIn, duplicates

API_KEY = "standin-mailgun-key"
SENDER_DOMAIN = "mg.example.com"


class Mailgun(AiohttpStandIn):
    name = "mailgun"
    client_max_size = 25 * 1024 * 1024  # Mailgun's limit on a message with its attachments

    def __init__(
        self, *, api_key: str = API_KEY, sender_domain: str = SENDER_DOMAIN, host: str = "127.0.0.1", port: int = 0
    ):
        super().__init__(host=host, port=port)
        self.api_key, self.sender_domain = api_key, sender_domain
        self.messages = []

    def settings(self) -> dict[str, str]:
        # With MAILGUN_API_KEY set, EMAIL_BACKEND defaults to anymail's Mailgun backend.
        return {
            "MAILGUN_API_URL": f"{self.origin}/v3",
            "MAILGUN_API_KEY": self.api_key,
            "MAILGUN_SENDER_DOMAIN": self.sender_domain,
        }

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v3/{domain}/messages", self.send)
        app.router.add_get("/v3/{domain}/events", self.events)

    def _refused(self, request: web.Request) -> web.Response | None:
        try:
            auth = BasicAuth.decode(request.headers.get("Authorization", ""))
        except ValueError:
            auth = None
        if auth is None or (auth.login, auth.password) != ("api", self.api_key):
            return web.Response(status=401, text="Forbidden")
        domain = request.match_info["domain"]
        if domain != self.sender_domain:
            return web.json_response({"message": f"Domain not found: {domain}"}, status=404)
        return None

    async def send(self, request: web.Request) -> web.Response:
        if refused := self._refused(request):
            return refused
        form = await request.post()
        ours = form.get("h:Message-Id")
        message_id = ours or f"<{uuid.uuid4().hex}@{self.sender_domain}>"
        to = form.getall("to", [])
        message = {"message_id": message_id, "ours": bool(ours), "to": to, "subject": form["subject"]}
        self.messages.append(message)
        files = [*form.getall("attachment", []), *form.getall("inline", [])]
        attachments = [getattr(file, "filename", "") for file in files]
        self.record(
            Received(
                self.name, "email", form["subject"], body=form.get("text", ""), html=form.get("html", ""),
                detail={"from": form.getall("from", []), "to": message["to"], "cc": form.getall("cc", []),
                        "bcc": form.getall("bcc", []), "reply_to": form.get("h:Reply-To", ""),
                        "message_id": message_id, "tags": form.getall("o:tag", []), "attachments": attachments},
            )
        )  # fmt: skip
        return web.json_response({"id": message_id, "message": "Queued. Thank you."})

    async def events(self, request: web.Request) -> web.Response:
        if refused := self._refused(request):
            return refused
        wanted = request.query.get("message-id", "")
        items = [
            {
                "event": "accepted",
                "timestamp": time.time(),
                "message": {"headers": {"message-id": m["message_id"].strip("<>"), "subject": m["subject"]}},
            }
            for m in self.messages
            if m["message_id"].strip("<>") == wanted
        ]
        return web.json_response({"items": items, "paging": {}})

    def duplicates(self) -> int:
        """By our Message-ID; a message sent without one by its recipients and subject."""
        return duplicates(m["message_id"] if m["ours"] else (*m["to"], m["subject"]) for m in self.messages)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="A local Mailgun that keeps the messages it is sent.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8769)
    parser.add_argument("--api-key", default=API_KEY, help="the key it accepts")
    parser.add_argument("--sender-domain", default=SENDER_DOMAIN)
    args = parser.parse_args(argv)
    mailgun = Mailgun(api_key=args.api_key, sender_domain=args.sender_domain, host=args.host, port=args.port)
    mailgun.serve_until_signalled()


if __name__ == "__main__":
    main()
