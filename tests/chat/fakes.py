"""Local fakes of the sales agent, answering as Agno does (event names and fields of agno/run/agent.py).

- FakeAgent: the agent's own WebSocket. It reads `{query, session_id, user_ip}`
  and answers with Agno run events as JSON text frames.
- FakeAgentOS: a stock AgentOS on pytest-httpserver: `POST /agents/{id}/runs`
  with form fields, answered as SSE frames `event: <RunEvent>\\ndata: <json>`.

Each plays a `mode`: "stream" (the whole answer), "stall" (stops after
`stall_after` deltas and says nothing more), "drop" (the connection breaks
after `drop_after` deltas), "error" (RunError after `error_after` deltas).
"""

import asyncio
import json
import threading
import time

from websockets.asyncio.server import serve
from werkzeug import Response

AGENT_ID = "sales-agent"
DEFAULT_TOKENS = ["Hello", "! We ", "build ", "prototypes ", "in ", "two ", "weeks."]


def agno_events(*, session_id, tokens, mode, cut_after, metadata):
    """The run events an Agno agent emits for one answer, as dicts; `None` marks where a fault happens."""
    base = {"agent_id": AGENT_ID, "agent_name": "Sales", "run_id": "run-1", "session_id": session_id}
    yield {"event": "RunStarted", "created_at": int(time.time()), **base}
    yield {"event": "ToolCallStarted", **base, "tool": {"tool_name": "lookup_lead"}}  # ignored by the relay
    for index, token in enumerate(tokens):
        if mode != "stream" and index == cut_after:
            yield None
            return
        yield {"event": "RunContent", "content": token, "content_type": "str", **base}
    yield {"event": "RunContentCompleted", **base}
    yield {
        "event": "RunCompleted",
        "content": "".join(tokens),
        "content_type": "str",
        "metadata": metadata,
        **base,
    }


class FakeAgentBase:
    def __init__(self):
        self.mode = "stream"
        self.tokens = list(DEFAULT_TOKENS)
        self.delay = 0.0  # seconds before each delta
        self.cut_after = 3  # deltas sent before a stall, drop or error
        self.metadata = {"intent": "prototype", "lead_created": False}
        self.received = []  # what each run was asked
        self.headers = []
        self.stopping = threading.Event()

    def answer(self, session_id):
        return agno_events(
            session_id=session_id, tokens=self.tokens, mode=self.mode, cut_after=self.cut_after, metadata=self.metadata
        )

    @property
    def full_answer(self):
        return "".join(self.tokens)

    def said_before_cut(self):
        return "".join(self.tokens[: self.cut_after])


class FakeAgent(FakeAgentBase):
    """The agent's WebSocket endpoint in a thread of its own (its own event loop)."""

    def __init__(self, *, reject_status: int | None = None):
        super().__init__()
        self.reject_status = reject_status
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def start(self):
        self.thread.start()
        self.ready.wait(5)
        return self

    @property
    def url(self):
        return f"ws://127.0.0.1:{self.port}/agent"

    def _serve(self):
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self._main())

    async def _main(self):
        self.stop_event = asyncio.Event()
        async with serve(self._handler, "127.0.0.1", 0, process_request=self._check) as server:
            self.port = server.sockets[0].getsockname()[1]
            self.ready.set()
            await self.stop_event.wait()

    def _check(self, connection, request):
        if self.reject_status:
            return connection.respond(self.reject_status, "refused\n")
        return None

    async def _handler(self, websocket):
        self.headers.append(dict(websocket.request.headers.raw_items()))
        request = json.loads(await websocket.recv())
        self.received.append(request)
        for event in self.answer(request.get("session_id")):
            if event is None:
                await self._fault(websocket)
                return
            if event["event"] == "RunContent" and self.delay:
                await asyncio.sleep(self.delay)
            await websocket.send(json.dumps(event))

    async def _fault(self, websocket):
        if self.mode == "drop":
            websocket.transport.abort()  # no close frame: the connection just breaks
        elif self.mode == "error":
            error = {"event": "RunError", "content": "model provider failed", "run_id": "run-1"}
            await websocket.send(json.dumps(error))
        else:  # stall: say nothing until the client gives up
            await websocket.wait_closed()

    def stop(self):
        self.loop.call_soon_threadsafe(self.stop_event.set)
        self.thread.join(5)


class FakeAgentOS(FakeAgentBase):
    """AgentOS's run endpoint on a pytest-httpserver."""

    def __init__(self, httpserver, *, status: int = 200, token: str = ""):
        super().__init__()
        self.httpserver = httpserver
        self.status = status
        self.token = token
        httpserver.expect_request(f"/agents/{AGENT_ID}/runs", method="POST").respond_with_handler(self._run)

    @property
    def url(self):
        return self.httpserver.url_for("/").rstrip("/")

    def _run(self, request):
        self.headers.append(dict(request.headers))
        self.received.append(request.form.to_dict())
        if self.token and request.headers.get("Authorization") != f"Bearer {self.token}":
            return Response(json.dumps({"detail": "Invalid authentication token"}), 401, mimetype="application/json")
        if self.status != 200:
            return Response(json.dumps({"detail": "unavailable"}), self.status, mimetype="application/json")
        return Response(self._frames(request.form.get("session_id")), mimetype="text/event-stream")

    def _frames(self, session_id):
        for event in self.answer(session_id):
            if event is None:
                yield from self._fault()
                return
            if event["event"] == "RunContent" and self.delay:
                time.sleep(self.delay)
            yield f"event: {event['event']}\ndata: {json.dumps(event, separators=(',', ':'))}\n\n"

    def _fault(self):
        if self.mode == "drop":
            raise ConnectionAbortedError("the agent went away")  # werkzeug cuts the chunked body short
        if self.mode == "error":
            error = {"event": "RunError", "content": "model provider failed", "run_id": "run-1"}
            yield f"event: RunError\ndata: {json.dumps(error)}\n\n"
            return
        self.stopping.wait(3)  # stall: nothing more, until the test is over
