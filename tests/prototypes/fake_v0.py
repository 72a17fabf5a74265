"""A local V0 Platform API v2 server for tests and benchmarks (aiohttp, in a thread of its own).

It answers with the shapes of vercel/v0-sdk's packages/v0-sdk/openapi.json:
`POST /chats/async` → 202 `{chatId, messageId}`; `GET /chats?metadata[k]=v` →
`{chats, cursor}`; `GET /chats/{id}/messages` → `{messages, cursor}` with
`finishReason` null until a message is final; `POST /chats/{id}/resume` → SSE
`data: <json>` frames (`chat`, `chat.title`, `message.parts.chunk` with
jsondiffpatch deltas, `message.usage`, then a closing `chat`);
`POST /chats/{id}/messages/resolve/async` and `/messages/async` → 202
`{messageId}`; `/messages/{mid}/stop` → `{messageId}`; `GET /chats/{id}/preview`
→ `{url, token, expiresAt}` or null; errors as `{message}`.

Each assistant message follows the next outcome of its chat's script:
"stop" (finishes with a preview), "plan" (finishes on an `exit_plan_mode`
agent action), "length" (stops mid-message, no preview), "generating" (never
finishes) or "error" (the stream sends an `error` frame). A message finishes
when its resume stream ends, or at once with `auto_finish`.
"""

import asyncio
import contextlib
import itertools
import json
import threading
import time
import uuid
from dataclasses import dataclass, field

from aiohttp import web

USAGE = {
    "tokens": {"input": 1200, "output": 800, "cacheRead": 0, "cacheWrite": 0, "total": 2000},
    "creditsCost": {"input": 0.01, "output": 0.02, "cacheRead": 0, "cacheWrite": 0, "total": 0.03},
}


@dataclass
class Behaviour:
    outcomes: list = field(default_factory=lambda: ["stop"])  # per assistant message, in order (last repeats)
    parts: int = 3  # parts streamed per message
    frame_interval: float = 0.05  # seconds between streamed frames
    stall_after: int | None = None  # stop sending (connection kept open) after this many part frames
    auto_finish: bool = False  # messages are final as soon as created (no stream needed)
    create_status: int | None = None  # answer POST /chats/async with this error status
    create_delay: float = 0.0  # seconds between creating a chat and answering (a caller's timeout loses the answer)
    read_delay: float = 0.0  # seconds before answering a read of a chat's messages or preview
    api_key: str = "v0-test-key"


@dataclass
class FakeChat:
    id: str
    metadata: dict
    prompt: str
    system_prompt: str
    messages: list = field(default_factory=list)
    preview: dict | None = None
    outcome_index: int = 0


class FakeV0:
    def __init__(self, behaviour: Behaviour | None = None):
        self.behaviour = behaviour or Behaviour()
        self.chats: dict[str, FakeChat] = {}
        self.requests: list[tuple[str, str, dict | None]] = []  # (method, path, json body)
        self.open_streams = 0
        self.reads_in_flight = 0
        self.most_reads_in_flight = 0  # messages and preview reads answered at once, at most
        self.emitted: dict[str, list[float]] = {}  # chat id -> when each part frame was written (time.time())
        self._ids = itertools.count(1)
        self._loop = asyncio.new_event_loop()
        self._runner = None
        self.url = ""

    # --- lifecycle --------------------------------------------------------------------
    def start(self) -> "FakeV0":
        ready = threading.Event()
        threading.Thread(target=self._serve, args=(ready,), daemon=True, name="fake-v0").start()
        ready.wait(10)
        return self

    def _serve(self, ready):
        asyncio.set_event_loop(self._loop)
        app = web.Application()
        app.router.add_get("/v2/chats", self.list_chats)
        app.router.add_post("/v2/chats/async", self.create_chat)
        app.router.add_get("/v2/chats/{chat}/messages", self.list_messages)
        app.router.add_post("/v2/chats/{chat}/messages/async", self.send_message)
        app.router.add_post("/v2/chats/{chat}/messages/resolve/async", self.resolve)
        app.router.add_post("/v2/chats/{chat}/messages/{message}/stop", self.stop)
        app.router.add_post("/v2/chats/{chat}/resume", self.resume)
        app.router.add_get("/v2/chats/{chat}/preview", self.preview)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1)
        self._loop.run_until_complete(self._runner.setup())
        site = web.TCPSite(self._runner, "127.0.0.1", 0, backlog=4096)
        self._loop.run_until_complete(site.start())
        port = site._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}/v2"
        ready.set()
        self._loop.run_forever()

    def stop_server(self):
        async def shutdown():
            await self._runner.cleanup()

        # A stalled stream may still be open: then the daemon thread goes with the process.
        with contextlib.suppress(TimeoutError):
            asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)

    # --- helpers for tests ---------------------------------------------------------------
    def requests_to(self, suffix: str) -> list[dict | None]:
        return [body for _, path, body in self.requests if path.endswith(suffix)]

    def finish_latest(self, chat_id: str) -> None:
        """The latest assistant message reaches its outcome now (from the test thread)."""
        chat = self.chats[chat_id]
        self._loop.call_soon_threadsafe(self._finish, chat, chat.messages[-1])

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

    def _chat_json(self, chat: FakeChat) -> dict:
        return {
            "id": chat.id,
            "title": "Reporting automation",
            "privacy": "private",
            "createdAt": "2026-12-01T12:00:00.000Z",
            "updatedAt": "2026-12-01T12:00:00.000Z",
            "authorId": "user_1",
            "metadata": chat.metadata,
            "writePermission": True,
        }

    def _message(self, chat: FakeChat, role: str, content: str) -> dict:
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
        return message

    def _next_outcome(self, chat: FakeChat) -> str:
        outcomes = self.behaviour.outcomes
        outcome = outcomes[min(chat.outcome_index, len(outcomes) - 1)]
        chat.outcome_index += 1
        return outcome

    def _finish(self, chat: FakeChat, message: dict) -> None:
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
            chat.preview = {
                "url": f"https://preview.example.com/{chat.id}",
                "token": "preview-token",
                "expiresAt": "2026-12-31T00:00:00.000Z",
            }
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
            return self._error(self.behaviour.create_status, "Rejected by the fake")
        if not isinstance(body, dict) or not body.get("message"):
            return self._error(422, "message is required")
        chat = FakeChat(
            id=f"chat_{uuid.uuid4().hex[:12]}",
            metadata=body.get("metadata") or {},
            prompt=body["message"],
            system_prompt=body.get("systemPrompt", ""),
        )
        self.chats[chat.id] = chat
        self._message(chat, "user", body["message"])
        message = self._message(chat, "assistant", "")
        await asyncio.sleep(self.behaviour.create_delay)
        return web.json_response({"chatId": chat.id, "messageId": message["id"]}, status=202)

    def _chat(self, request) -> FakeChat | None:
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

    async def stop(self, request):
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

    async def _stream(self, chat: FakeChat, response):
        async def send(frame):
            await response.write(f"data: {json.dumps(frame)}\n\n".encode())

        message = chat.messages[-1]
        await send({**self._chat_json(chat), "object": "chat"})
        if message["finishReason"] is not None:
            return  # nothing active: a closing chat-state event only
        await send({"id": chat.id, "object": "chat.title", "delta": "Reporting automation"})
        kinds = [
            {"type": "thinking", "text": "Planning the app"},
            {"type": "file-edit", "operation": "create", "path": "app/page.tsx"},
            {"type": "file-edit", "operation": "create", "path": "components/report-table.tsx"},
            {"type": "bash", "command": "npm run build"},
        ]
        for index in range(self.behaviour.parts):
            if self.behaviour.stall_after is not None and index >= self.behaviour.stall_after:
                await asyncio.sleep(3600)
            await asyncio.sleep(self.behaviour.frame_interval)
            part = kinds[index % len(kinds)]
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
