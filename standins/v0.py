"""A local V0 Platform API v2 that answers as V0 does (vercel/v0-sdk, packages/v0-sdk/openapi.json).

`POST /v2/chats/async` → 202 `{chatId, messageId}`; `GET /v2/chats?metadata[k]=v` → `{chats, cursor}`;
`GET /v2/chats/{id}/messages` → `{messages, cursor}` with `finishReason` null until a message is final;
`POST /v2/chats/{id}/resume` → SSE `data: <json>` frames (`chat`, `chat.title`, `message.parts.chunk` with
jsondiffpatch deltas, `message.usage`, then a closing `chat`); `POST /v2/chats/{id}/messages/resolve/async`
and `/messages/async` → 202 `{messageId}`; `/messages/{mid}/stop` → `{messageId}`;
`GET /v2/chats/{id}/preview` → `{url, token, expiresAt}` or null; errors as `{message}`.

Each assistant message follows the next outcome of its chat's script (`Behaviour.outcomes`): "stop"
(finishes with a preview), "plan" (finishes on an `exit_plan_mode` agent action), "length" (stops
mid-message, no preview), "generating" (never finishes) or "error" (the stream sends an `error` frame).
A message finishes when its resume stream ends, at once with `auto_finish`, or `finish_after` seconds
after it was started, as a real generation does whether anyone reads its stream or not.

For a person looking on, it also serves what V0's web app would: `GET /chat/{id}` (the chat, the admin's
link through V0_CHAT_WEB_URL) and `GET /preview/{id}` (the built prototype, when `preview_base` is None).

In tests:

    with V0(Behaviour(auto_finish=True)) as v0:
        settings.V0_API_URL, settings.V0_API_KEY = v0.url, v0.behaviour.api_key

Alone, as `make run` wants it (generations of a few seconds, previews served here, every third chat
proposing a plan first), or for a benchmark (`--finish-after 0 --plan-every 0`: a message ends with its
stream; `--emitted FILE` writes when each part frame was sent, on SIGTERM):

    python -m standins.v0 --port 8766 [--parts 60 --interval 1.0]
"""

import argparse
import asyncio
import contextlib
import html
import itertools
import json
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

from standins.base import Received
from standins.serving import AiohttpStandIn

API_KEY = "standin-v0-key"
USAGE = {
    "tokens": {"input": 1200, "output": 800, "cacheRead": 0, "cacheWrite": 0, "total": 2000},
    "creditsCost": {"input": 0.01, "output": 0.02, "cacheRead": 0, "cacheWrite": 0, "total": 0.03},
}
_PARTS = [
    {"type": "thinking", "text": "Planning the app"},
    {"type": "file-edit", "operation": "create", "path": "app/page.tsx"},
    {"type": "file-edit", "operation": "create", "path": "components/report-table.tsx"},
    {"type": "bash", "command": "npm run build"},
]


@dataclass
class Behaviour:
    outcomes: list = field(default_factory=lambda: ["stop"])  # per assistant message, in order (last repeats)
    parts: int = 3  # parts streamed per message
    frame_interval: float = 0.05  # seconds between streamed frames
    stall_after: int | None = None  # stop sending (connection kept open) after this many part frames
    auto_finish: bool = False  # messages are final as soon as created (no stream needed)
    finish_after: float | None = None  # seconds after which a message reaches its outcome, streamed or not
    plan_every: int = 0  # every n-th chat proposes a plan before its script (0: none)
    create_status: int | None = None  # answer POST /chats/async with this error status
    create_delay: float = 0.0  # seconds between creating a chat and answering (a caller's timeout loses the answer)
    read_delay: float = 0.0  # seconds before answering a read of a chat's messages or preview
    title: str = "Reporting automation"  # the title V0 gives every chat
    preview_base: str | None = "https://preview.example.com/"  # + chat id; None: this stand-in's /preview/
    api_key: str = API_KEY


def demo_behaviour() -> Behaviour:
    """What `make run` shows: each generation streams for a few seconds and finishes by itself, watched or
    not, with a preview this stand-in serves; every third chat asks for its plan to be approved first."""
    return Behaviour(parts=6, frame_interval=1.0, finish_after=8.0, plan_every=3, preview_base=None)


@dataclass
class Chat:
    id: str
    metadata: dict
    prompt: str
    system_prompt: str
    plans_first: bool = False
    messages: list = field(default_factory=list)
    preview: dict | None = None
    outcome_index: int = 0


class V0(AiohttpStandIn):
    name = "v0"

    def __init__(self, behaviour: Behaviour | None = None, *, host: str = "127.0.0.1", port: int = 0):
        super().__init__(host=host, port=port)
        self.behaviour = behaviour or Behaviour()
        self.chats: dict[str, Chat] = {}
        self.requests: list[tuple[str, str, dict | None]] = []  # (method, path, json body)
        self.open_streams = 0
        self.reads_in_flight = 0
        self.most_reads_in_flight = 0  # messages and preview reads answered at once, at most
        self.emitted: dict[str, list[float]] = {}  # chat id -> when each part frame was written (time.time())
        self._ids = itertools.count(1)

    @property
    def url(self) -> str:
        return f"{self.origin}/v2"

    def settings(self) -> dict[str, str]:
        return {"V0_API_URL": self.url, "V0_API_KEY": self.behaviour.api_key, "V0_CHAT_WEB_URL": f"{self.origin}/chat/"}

    def routes(self, app: web.Application) -> None:
        app.router.add_get("/v2/chats", self.list_chats)
        app.router.add_post("/v2/chats/async", self.create_chat)
        app.router.add_get("/v2/chats/{chat}/messages", self.list_messages)
        app.router.add_post("/v2/chats/{chat}/messages/async", self.send_message)
        app.router.add_post("/v2/chats/{chat}/messages/resolve/async", self.resolve)
        app.router.add_post("/v2/chats/{chat}/messages/{message}/stop", self.stop_message)
        app.router.add_post("/v2/chats/{chat}/resume", self.resume)
        app.router.add_get("/v2/chats/{chat}/preview", self.preview)
        app.router.add_get("/chat/{chat}", self.chat_page)
        app.router.add_get("/preview/{chat}", self.preview_page)

    # --- helpers for tests ---------------------------------------------------------------
    def requests_to(self, suffix: str) -> list[dict | None]:
        return [body for _, path, body in self.requests if path.endswith(suffix)]

    def finish_latest(self, chat_id: str) -> None:
        """The latest assistant message reaches its outcome now (from the test thread)."""
        chat = self.chats[chat_id]
        self._loop.call_soon_threadsafe(self._finish, chat, chat.messages[-1])

    def chats_per_lead(self) -> Counter:
        return Counter(chat.metadata.get("leadKey") for chat in list(self.chats.values()))

    # --- handlers --------------------------------------------------------------------------
    async def _record(self, request) -> dict | None:
        body = None
        if request.can_read_body:
            try:
                body = await request.json()
            except ValueError:
                body = None
        self.requests.append((request.method, request.path, body))
        return body

    def _authorized(self, request) -> bool:
        return request.headers.get("Authorization") == f"Bearer {self.behaviour.api_key}"

    def _error(self, status, message):
        return web.json_response({"message": message}, status=status)

    def _chat_json(self, chat: Chat) -> dict:
        return {
            "id": chat.id,
            "title": self.behaviour.title,
            "privacy": "private",
            "createdAt": "2026-12-01T12:00:00.000Z",
            "updatedAt": "2026-12-01T12:00:00.000Z",
            "authorId": "user_1",
            "metadata": chat.metadata,
            "writePermission": True,
        }

    def _message(self, chat: Chat, role: str, content: str) -> dict:
        message = {
            "id": f"msg_{next(self._ids)}",
            "chatId": chat.id,
            "role": role,
            "createdAt": f"2026-12-01T12:00:{len(chat.messages):02d}.000Z",
            "updatedAt": f"2026-12-01T12:00:{len(chat.messages):02d}.000Z",
            "content": content,
            "parts": [{"type": "text", "text": content}] if role == "user" else [],
            "finishReason": "stop" if role == "user" else None,
            "restorable": False,
            "authorId": "user_1" if role == "user" else None,
            "usage": USAGE,
        }
        chat.messages.append(message)
        if role == "assistant":
            message["_outcome"] = self._next_outcome(chat)
            if self.behaviour.auto_finish:
                self._finish(chat, message)
            elif self.behaviour.finish_after is not None:
                self._loop.call_later(self.behaviour.finish_after, self._finish, chat, message)
        return message

    def _next_outcome(self, chat: Chat) -> str:
        script = ["plan", *self.behaviour.outcomes] if chat.plans_first else self.behaviour.outcomes
        outcome = script[min(chat.outcome_index, len(script) - 1)]
        chat.outcome_index += 1
        return outcome

    def _finish(self, chat: Chat, message: dict) -> None:
        if message["finishReason"] is not None:
            return
        outcome = message["_outcome"]
        if outcome == "generating":
            return
        if outcome == "plan":
            message["parts"].append(
                {
                    "type": "agent-action",
                    "name": "exit_plan_mode",
                    "summary": "Proposed a plan",
                    "data": {"plan": "## Plan\n1. Build the dashboard", "path": "/"},
                }
            )
            message["finishReason"] = "stop"
        elif outcome == "stop":
            message["parts"].append({"type": "text", "text": "Your app is ready."})
            message["finishReason"] = "stop"
            base = self.behaviour.preview_base or f"{self.origin}/preview/"
            expires = "2026-12-31T00:00:00.000Z"
            chat.preview = {"url": f"{base}{chat.id}", "token": "preview-token", "expiresAt": expires}
        else:  # length, error
            message["finishReason"] = outcome

    def _public(self, message: dict) -> dict:
        return {k: v for k, v in message.items() if not k.startswith("_")}

    async def list_chats(self, request):
        await self._record(request)
        if not self._authorized(request):
            return self._error(401, "Unauthorized")
        wanted = {key[9:-1]: value for key, value in request.query.items() if key.startswith("metadata[")}
        found = [c for c in self.chats.values() if all(c.metadata.get(k) == v for k, v in wanted.items())]
        return web.json_response({"chats": [self._chat_json(c) for c in found], "cursor": None})

    async def create_chat(self, request):
        body = await self._record(request)
        if not self._authorized(request):
            return self._error(401, "Unauthorized")
        if self.behaviour.create_status:
            return self._error(self.behaviour.create_status, "Rejected by the stand-in")
        if not isinstance(body, dict) or not body.get("message"):
            return self._error(422, "message is required")
        chat = Chat(
            id=f"chat_{uuid.uuid4().hex[:12]}",
            metadata=body.get("metadata") or {},
            prompt=body["message"],
            system_prompt=body.get("systemPrompt", ""),
        )
        self.chats[chat.id] = chat
        chat.plans_first = bool(self.behaviour.plan_every) and len(self.chats) % self.behaviour.plan_every == 0
        self._message(chat, "user", body["message"])
        message = self._message(chat, "assistant", "")
        first_line = chat.prompt.strip().splitlines()[0] if chat.prompt.strip() else chat.id
        self.record(
            Received(
                service=self.name, kind="chat", title=first_line[:120], body=chat.prompt,
                detail={"chatId": chat.id, "metadata": chat.metadata, "systemPrompt": chat.system_prompt,
                        "model": (body.get("modelConfiguration") or {}).get("modelId", "")},
            )
        )  # fmt: skip
        await asyncio.sleep(self.behaviour.create_delay)
        return web.json_response({"chatId": chat.id, "messageId": message["id"]}, status=202)

    def _chat(self, request) -> Chat | None:
        return self.chats.get(request.match_info["chat"])

    @contextlib.asynccontextmanager
    async def _read(self):
        self.reads_in_flight += 1
        self.most_reads_in_flight = max(self.most_reads_in_flight, self.reads_in_flight)
        try:
            await asyncio.sleep(self.behaviour.read_delay)
            yield
        finally:
            self.reads_in_flight -= 1

    async def list_messages(self, request):
        await self._record(request)
        if not self._authorized(request):
            return self._error(401, "Unauthorized")
        if (chat := self._chat(request)) is None:
            return self._error(404, "Chat not found")
        async with self._read():
            newest_first = [self._public(m) for m in reversed(chat.messages)]
        return web.json_response({"messages": newest_first, "cursor": None})

    async def send_message(self, request):
        body = await self._record(request)
        if (chat := self._chat(request)) is None:
            return self._error(404, "Chat not found")
        self._message(chat, "user", (body or {}).get("message", ""))
        return web.json_response({"messageId": self._message(chat, "assistant", "")["id"]}, status=202)

    async def resolve(self, request):
        body = await self._record(request)
        if (chat := self._chat(request)) is None:
            return self._error(404, "Chat not found")
        task = (body or {}).get("task") or {}
        if task.get("type") != "plan-exit-response" or task.get("status") not in ("approved", "rejected"):
            return self._error(422, "Invalid task")
        latest = chat.messages[-1]
        if not any(p.get("name") == "exit_plan_mode" for p in latest["parts"]):
            return self._error(409, "No pending task")
        return web.json_response({"messageId": self._message(chat, "assistant", "")["id"]}, status=202)

    async def stop_message(self, request):
        await self._record(request)
        chat = self._chat(request)
        message = next((m for m in (chat.messages if chat else []) if m["id"] == request.match_info["message"]), None)
        if message is None:
            return self._error(404, "Message not found")
        if message["finishReason"] is None:
            message["finishReason"] = "other"
        return web.json_response({"messageId": message["id"]})

    async def preview(self, request):
        await self._record(request)
        if (chat := self._chat(request)) is None:
            return self._error(404, "Chat not found")
        async with self._read():
            return web.json_response(chat.preview)

    async def resume(self, request):
        await self._record(request)
        if not self._authorized(request):
            return self._error(401, "Unauthorized")
        if (chat := self._chat(request)) is None:
            return self._error(404, "Chat not found")
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)
        self.open_streams += 1
        try:
            await self._stream(chat, response)
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.open_streams -= 1
        return response

    async def _stream(self, chat: Chat, response):
        async def send(frame):
            await response.write(f"data: {json.dumps(frame)}\n\n".encode())

        message = chat.messages[-1]
        await send({**self._chat_json(chat), "object": "chat"})
        if message["finishReason"] is not None:
            return  # nothing active: a closing chat-state event only
        await send({"id": chat.id, "object": "chat.title", "delta": self.behaviour.title})
        for index in range(self.behaviour.parts):
            if self.behaviour.stall_after is not None and index >= self.behaviour.stall_after:
                await asyncio.sleep(3600)
            await asyncio.sleep(self.behaviour.frame_interval)
            part = _PARTS[index % len(_PARTS)]
            await send({"id": message["id"], "object": "message.parts.chunk", "delta": {"_t": "a", str(index): [part]}})
            self.emitted.setdefault(chat.id, []).append(time.time())
            message["parts"].append(part)
        if message["_outcome"] == "error":
            await send({"id": message["id"], "object": "error", "message": "Generation failed", "code": "internal"})
            message["finishReason"] = "error"
            return
        await send({"id": message["id"], "object": "message.usage", "usage": USAGE})
        self._finish(chat, message)
        await send({**self._chat_json(chat), "object": "chat"})

    # --- what V0's web app shows a person ---------------------------------------------------
    async def chat_page(self, request):
        if (chat := self._chat(request)) is None:
            raise web.HTTPNotFound()
        rows = "".join(
            f"<li><b>{m['role']}</b> ({html.escape(str(m['finishReason'] or 'generating'))}): "
            f"{html.escape(m['content'] or ', '.join(p.get('name') or p.get('path') or p['type'] for p in m['parts']))}"
            "</li>"
            for m in chat.messages
        )
        preview = f'<p><a href="{html.escape(chat.preview["url"])}">Preview</a></p>' if chat.preview else ""
        return _page(f"{self.behaviour.title} · V0 chat", f"<ol>{rows}</ol>{preview}")

    async def preview_page(self, request):
        if (chat := self._chat(request)) is None or chat.preview is None:
            raise web.HTTPNotFound()
        return _page("Prototype preview", f"<p>{html.escape(self.behaviour.title)}</p><p>Built from: "
                                          f"{html.escape(chat.prompt[:500])}</p>")  # fmt: skip


def _page(title: str, body: str) -> web.Response:
    text = (f'<!doctype html><html lang="en"><meta charset="utf-8"><title>{html.escape(title)}</title>'
            f"<body><h1>{html.escape(title)}</h1>{body}</body></html>")  # fmt: skip
    return web.Response(text=text, content_type="text/html")


def main(argv: Sequence[str] | None = None) -> None:
    demo = demo_behaviour()
    parser = argparse.ArgumentParser(description="A local V0 Platform API v2 whose generations build a preview.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8766)
    parser.add_argument("--api-key", default=demo.api_key, help="the key it accepts")
    parser.add_argument("--parts", type=int, default=demo.parts, help="part frames streamed per message")
    parser.add_argument("--interval", type=float, default=demo.frame_interval, help="seconds between part frames")
    parser.add_argument("--finish-after", type=float, default=demo.finish_after,
                        help="seconds until a message finishes, streamed or not (0: when its stream ends)")  # fmt: skip
    parser.add_argument("--plan-every", type=int, default=demo.plan_every, help="every n-th chat plans first (0: none)")
    parser.add_argument("--emitted", type=Path, help="on stopping, write when each part frame was sent (JSON)")
    args = parser.parse_args(argv)
    behaviour = Behaviour(
        parts=args.parts, frame_interval=args.interval, finish_after=args.finish_after or None,
        plan_every=args.plan_every, preview_base=None, api_key=args.api_key,
    )  # fmt: skip
    v0 = V0(behaviour, host=args.host, port=args.port)
    v0.serve_until_signalled()
    if args.emitted:
        args.emitted.write_text(json.dumps(v0.emitted))


if __name__ == "__main__":
    main()
