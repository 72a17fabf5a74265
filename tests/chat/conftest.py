import asyncio
import json
import time
from dataclasses import dataclass, field

import pytest
from django.core.cache import cache

from chat import relay
from config.asgi import application
from standins.agent import Agent

CHAT_KEY = "chat-key-for-tests"
SESSION = "visitor-session-1"


@pytest.fixture(autouse=True)
def chat_settings(settings):
    settings.CHAT_API_KEY = CHAT_KEY
    settings.CHAT_AGENT_TOKEN = "agent-token"
    settings.CHAT_AGENT_CONNECT_TIMEOUT_SECONDS = 2.0
    settings.CHAT_AGENT_FIRST_TOKEN_TIMEOUT_SECONDS = 2.0
    settings.CHAT_AGENT_TIMEOUT_SECONDS = 5.0
    settings.CHAT_STREAM_RATE_PER_SESSION = "1000/min"
    settings.CHAT_STREAM_RATE_PER_IP = "1000/min"
    settings.LLM_BASE_URL = ""
    settings.RECAPTCHA_SECRET_KEY = ""
    cache.clear()
    return settings


@pytest.fixture
def fake_agent(settings):
    with Agent() as agent:
        settings.CHAT_AGENT_URL = agent.url
        yield agent


@pytest.fixture
def fake_agentos(settings):
    with Agent(token="agent-token") as agent:
        settings.CHAT_AGENT_URL = agent.agentos_url
        yield agent


@dataclass
class StreamResult:
    status: int = 0
    headers: dict = field(default_factory=dict)
    body: bytes = b""
    events: list = field(default_factory=list)  # (name, data, seconds since the request)
    chunks: int = 0

    def named(self, name):
        return [data for event, data, _ in self.events if event == name]

    @property
    def text(self):
        return "".join(data["content"] for data in self.named("token"))

    def json(self):
        return json.loads(self.body)


def chat_request(body, *, headers=None, key=CHAT_KEY, leave_after_tokens=None, path="/api/chat/stream", wait=10.0):
    """POST through config.asgi.application (daphne's app) in this thread's event loop, reading the body as it
    streams; `leave_after_tokens` makes the browser go away after that many token events. Waits for the relays."""

    async def run():
        result = await chat_call(body, headers=headers, key=key, leave_after_tokens=leave_after_tokens, path=path,
                                 wait=wait)  # fmt: skip
        await relay.relays_finish(wait)
        return result

    return asyncio.run(run())


async def chat_call(body, *, headers=None, key=CHAT_KEY, leave_after_tokens=None, path="/api/chat/stream", wait=10.0):
    """chat_request's one POST, in the running event loop (several at once: asyncio.gather), not waiting for the
    relays."""
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    sent_headers = [
        (b"host", b"localhost"),
        (b"content-type", b"application/json"),
        (b"content-length", b"%d" % len(raw)),
    ]
    if key is not None:
        sent_headers.append((b"x-chat-api-key", key.encode()))
    sent_headers += [(name.lower().encode(), value.encode()) for name, value in (headers or {}).items()]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": sent_headers,
        "client": ("203.0.113.9", 40000),
        "server": ("localhost", 80),
    }
    result = StreamResult()
    inbox = asyncio.Queue()
    inbox.put_nowait({"type": "http.request", "body": raw, "more_body": False})
    started = time.monotonic()
    buffer = b""

    async def receive():
        return await inbox.get()

    async def send(message):
        nonlocal buffer
        if message["type"] == "http.response.start":
            result.status = message["status"]
            result.headers = {k.decode().lower(): v.decode() for k, v in message["headers"]}
            return
        result.body += message.get("body", b"")
        result.chunks += bool(message.get("body"))
        buffer += message.get("body", b"")
        while b"\n\n" in buffer:
            block, buffer = buffer.split(b"\n\n", 1)
            lines = dict(line.split(": ", 1) for line in block.decode().split("\n") if not line.startswith(":"))
            if "event" in lines:
                result.events.append((lines["event"], json.loads(lines["data"]), time.monotonic() - started))
        if leave_after_tokens is not None and len(result.named("token")) >= leave_after_tokens:
            inbox.put_nowait({"type": "http.disconnect"})

    await asyncio.wait_for(application(scope, receive, send), wait)
    return result
