"""The stand-ins' inbox: one page listing what every stand-in received, newest first.

Emails as their reader sees them (the HTML part in a sandboxed frame), Pipedrive persons, leads and
notes, ClickUp alerts, CRM deliveries with their signature check, chats, leads fetched. `/received.json`
gives the same list to scripts and tests.
"""

import html
import json
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from standins.base import Received, StandIn

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Stand-ins: what they received</title>
<meta http-equiv="refresh" content="15">
<style>
body {{ font-family: system-ui, sans-serif; margin: 0; background: #f4f6fb; color: #0f172a; }}
header {{ background: #fff7d6; border-bottom: 1px solid #e6cf7a; padding: .75rem 1.5rem; }}
main {{ padding: 1rem 1.5rem; max-width: 70rem; }}
nav a {{ margin-right: .75rem; }}
article {{ background: #fff; border-radius: .5rem; padding: .75rem 1rem; margin: .75rem 0;
           box-shadow: 0 1px 2px rgba(0,0,0,.08); }}
.meta {{ color: #475569; font-size: .85rem; }}
.kind {{ display: inline-block; background: #e0e7ff; border-radius: .25rem; padding: 0 .4rem; margin-right: .4rem; }}
pre {{ white-space: pre-wrap; background: #f8fafc; padding: .5rem; border-radius: .25rem; }}
iframe {{ width: 100%; height: 22rem; border: 1px solid #e2e8f0; border-radius: .25rem; background: #fff; }}
</style></head><body>
<header><strong>Outside services are local stand-ins: nothing leaves this machine.</strong>
This page lists what each one received. <a href="{admin}">Back office</a></header>
<main><nav>{nav}</nav><p class="meta">{count} received{filtered}.</p>{items}</main></body></html>
"""


def _item(item: Received) -> str:
    parts = [
        f'<article data-service="{html.escape(item.service)}" data-kind="{html.escape(item.kind)}">',
        f'<div class="meta"><span class="kind">{html.escape(item.service)} · {html.escape(item.kind)}</span>'
        f"{item.at:%Y-%m-%d %H:%M:%S} UTC</div>",
        f"<h3>{html.escape(item.title)}</h3>",
    ]
    if item.html:
        # The email as its reader sees it; sandboxed, so its markup can run nothing here.
        parts.append(f'<iframe sandbox="" srcdoc="{html.escape(item.html, quote=True)}" title="email"></iframe>')
    elif item.body:
        parts.append(f"<pre>{html.escape(item.body)}</pre>")
    if item.detail:
        parts.append(f"<pre>{html.escape(json.dumps(item.detail, indent=2, default=str))}</pre>")
    parts.append("</article>")
    return "".join(parts)


class Inbox:
    """The page's HTTP server, over the running stand-ins."""

    def __init__(self, stand_ins: Sequence[StandIn], *, port: int = 0, admin_url: str = "/"):
        inbox = self
        self.stand_ins = stand_ins
        self.admin_url = admin_url

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                parts = urlsplit(self.path)
                service = parse_qs(parts.query).get("service", [""])[-1]
                items = inbox.items(service)
                if parts.path == "/received.json":
                    body, kind = json.dumps([_as_json(item) for item in items]).encode(), "application/json"
                elif parts.path == "/":
                    body, kind = inbox.page(items, service).encode(), "text/html; charset=utf-8"
                else:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}/"

    def items(self, service: str = "") -> list[Received]:
        found = [item for stand_in in self.stand_ins for item in stand_in.received()]
        if service:
            found = [item for item in found if item.service == service]
        return sorted(found, key=lambda item: item.at, reverse=True)

    def page(self, items: list[Received], service: str) -> str:
        names = sorted({stand_in.name for stand_in in self.stand_ins})
        nav = '<a href="/">all</a>' + "".join(f'<a href="/?service={name}">{name}</a>' for name in names)
        return PAGE.format(
            admin=html.escape(self.admin_url),
            nav=nav,
            count=len(items),
            filtered=f" by {html.escape(service)}" if service else "",
            items="".join(_item(item) for item in items[:200]),
        )

    def start(self) -> "Inbox":
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True).start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _as_json(item: Received) -> dict:
    return {"service": item.service, "kind": item.kind, "title": item.title, "body": item.body,
            "html": item.html, "detail": item.detail, "at": item.at.isoformat()}  # fmt: skip
