"""The sales agent: an Agno agent behind a WebSocket, or a stock Agno AgentOS over HTTP.

Both speak Agno run events (`agno/run/agent.py`, RunEvent): `RunContent`
carries a delta of the answer, `RunCompleted` the full text and metadata,
`RunError` / `RunCancelled` end the run without an answer; everything else
(tool calls, reasoning, memory updates) is ignored. `AgentClient.run` turns
either transport into one async iterator of `AgentEvent`s that ends after the
completed or error event.

Failures map as HttpClient maps them: connection errors, timeouts, a dropped
connection, 429 and 5xx raise TransientError; other 4xx raise PermanentError.
Nothing here logs the conversation: host and path only.

These clients do not subclass integrations.http.HttpClient: that one is
synchronous (urllib3), and a stream held open for a whole answer inside an
async view needs an asyncio client (websockets; httpx with httpx-sse).
"""

import asyncio
import contextlib
import functools
import json
import ssl
import time
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import httpx
import structlog
import websockets
from django.conf import settings
from httpx_sse import SSEError, aconnect_sse
from websockets.asyncio.client import connect
from websockets.proxy import get_proxy
from websockets.uri import parse_uri

from integrations.http import environment_ca_bundle, is_transient_status
from jobs import PermanentError, TransientError

logger = structlog.get_logger(__name__)

SERVICE = "agent"
RUN_CONTENT = "RunContent"
RUN_COMPLETED = "RunCompleted"
ENDING_EVENTS = {"RunError": "error", "RunCancelled": "error"}
MAX_FRAME_BYTES = 1024 * 1024


@dataclass(frozen=True)
class AgentEvent:
    kind: str  # "token" (a delta), "completed" (full text + metadata) or "error" (the agent's message)
    content: str = ""
    metadata: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Timeouts:
    connect: float
    first_token: float
    total: float


def event_from_agno(data: dict) -> AgentEvent | None:
    """The AgentEvent for one Agno run event, None for events the relay does not use."""
    name = data.get("event")
    content = data.get("content")
    if name == RUN_CONTENT:
        # Structured output (content_type other than str) arrives whole in RunCompleted.
        return AgentEvent("token", content) if isinstance(content, str) and content else None
    if name == RUN_COMPLETED:
        metadata = data.get("metadata") if isinstance(data.get("metadata"), dict) else {}
        if data.get("run_id"):
            metadata = {**metadata, "run_id": data["run_id"]}
        text = content if isinstance(content, str) else (json.dumps(content) if content is not None else "")
        return AgentEvent("completed", text, metadata)
    if name in ENDING_EVENTS:
        message = content if isinstance(content, str) and content else data.get("reason") or name
        return AgentEvent("error", str(message)[:500])
    return None


class AgentClient:
    """One run of the agent as an async iterator; subclasses say how to reach it."""

    def __init__(self, url: str, *, token: str = "", timeouts: Timeouts):
        self.url = url
        self.token = token
        self.timeouts = timeouts
        parts = urlsplit(url)
        self.log = logger.bind(service=SERVICE, host=parts.hostname, path=parts.path)

    def _headers(self) -> dict:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    async def run(
        self, *, query: str, session_id: str, user_ip: str | None, after: Awaitable | None = None
    ) -> AsyncIterator[AgentEvent]:
        """Events of one answer; the first within `first_token` seconds, all of them within `total`.

        `after`, when given, is awaited before the query is sent (and its error raised, nothing sent): the
        WebSocket connects meanwhile, so what the caller must do first does not wait for the handshake too.
        """
        started = time.monotonic()
        deadline = asyncio.get_running_loop().time() + self.timeouts.total
        answered = False
        first_token_by = min(self.timeouts.connect + self.timeouts.first_token, self.timeouts.total)
        try:
            # aclosing: the connection is closed as soon as the answer ends, not when the generator is collected.
            stream = contextlib.aclosing(
                self._agno_events(query=query, session_id=session_id, user_ip=user_ip, after=after)
            )
            async with asyncio.timeout(first_token_by) as cm, stream as agno_events:
                async for data in agno_events:
                    event = event_from_agno(data)
                    if event is None:
                        continue
                    if not answered:
                        answered = True
                        cm.reschedule(deadline)
                    yield event
                    if event.kind != "token":
                        self.log.info("agent_run", outcome=event.kind, duration_ms=_ms(started))
                        return
        except TimeoutError as exc:
            self.log.warning("agent_timeout", answered=answered, duration_ms=_ms(started))
            raise TransientError(f"{SERVICE}: timed out") from exc
        self.log.warning("agent_dropped", duration_ms=_ms(started))
        raise TransientError(f"{SERVICE}: the stream ended before the answer was complete")

    async def _agno_events(
        self, *, query: str, session_id: str, user_ip: str | None, after: Awaitable | None
    ) -> AsyncIterator[dict]:
        raise NotImplementedError  # pragma: no cover
        yield {}


class WebSocketAgentClient(AgentClient):
    """The agent's own WebSocket: send `{query, session_id, user_ip}`, read Agno events as JSON text frames."""

    async def _agno_events(self, *, query, session_id, user_ip, after):
        try:
            websocket = await connect(
                self.url,
                additional_headers=self._headers(),
                open_timeout=self.timeouts.connect,
                max_size=MAX_FRAME_BYTES,
                user_agent_header=settings.HTTP_USER_AGENT,
                # Our own deadlines bound the run; keepalive pings would only add traffic.
                ping_interval=None,
                close_timeout=2,
                compression=None,  # deltas are a few bytes: deflate costs CPU and saves nothing
                proxy=_proxy_for(self.url),
            )
        except websockets.InvalidStatus as exc:
            raise _status_error(exc.response.status_code) from exc
        except (OSError, websockets.InvalidHandshake, TimeoutError) as exc:
            self.log.warning("agent_connection_error", error=type(exc).__name__)
            raise TransientError(f"{SERVICE}: connection failed") from exc
        async with websocket:
            if after is not None:
                await after
            await websocket.send(json.dumps({"query": query, "session_id": session_id, "user_ip": user_ip}))
            try:
                async for frame in websocket:
                    data = _json_object(frame)
                    if data is not None:
                        yield data
            except websockets.ConnectionClosedError as exc:
                self.log.warning("agent_connection_closed", code=exc.rcvd.code if exc.rcvd else None)
                raise TransientError(f"{SERVICE}: connection dropped") from exc


class AgentOSClient(AgentClient):
    """A stock AgentOS: `POST {url}/agents/{agent_id}/runs` (form fields), answered as SSE frames.

    `user_id` is the visitor's IP when known (the identity the rate limits
    follow), else the session id.
    """

    def __init__(self, url: str, *, agent_id: str, token: str = "", timeouts: Timeouts):
        super().__init__(f"{url.rstrip('/')}/agents/{agent_id}/runs", token=token, timeouts=timeouts)

    async def _agno_events(self, *, query, session_id, user_ip, after):
        if after is not None:  # the query goes with the request: nothing to open before it
            await after
        form = {"message": query, "stream": "true", "session_id": session_id, "user_id": user_ip or session_id}
        timeout = httpx.Timeout(self.timeouts.total, connect=self.timeouts.connect)
        headers = {**self._headers(), "User-Agent": settings.HTTP_USER_AGENT}
        async with httpx.AsyncClient(timeout=timeout, verify=_ssl_context(), trust_env=True) as client:
            try:
                async with aconnect_sse(client, "POST", self.url, data=form, headers=headers) as source:
                    status = source.response.status_code
                    if status >= 400:
                        raise _status_error(status)
                    async for sse in source.aiter_sse():
                        data = _json_object(sse.data)
                        if data is not None:
                            data.setdefault("event", sse.event)
                            yield data
            except SSEError as exc:  # answered, but not with an event stream: not an AgentOS run endpoint
                raise PermanentError(f"{SERVICE}: not an event stream") from exc
            except httpx.TimeoutException as exc:
                raise TimeoutError from exc
            except httpx.TransportError as exc:  # connection refused or reset, a body cut short
                self.log.warning("agent_connection_error", error=type(exc).__name__)
                raise TransientError(f"{SERVICE}: connection failed") from exc


@functools.lru_cache(maxsize=8)
def _proxy_for(url: str) -> str | None:
    """The egress proxy the environment names for `url`, worked out once: websockets would scan the whole
    environment on every connection (a measurable part of a chat's start under load)."""
    return get_proxy(parse_uri(url))


_ssl_contexts: dict[str | None, ssl.SSLContext] = {}


def _ssl_context() -> ssl.SSLContext:
    """One SSL context per CA bundle: building one loads the whole bundle (milliseconds per run otherwise)."""
    bundle = environment_ca_bundle()
    if bundle not in _ssl_contexts:
        _ssl_contexts[bundle] = ssl.create_default_context(cafile=bundle)
    return _ssl_contexts[bundle]


def _status_error(status: int) -> Exception:
    if is_transient_status(status):
        return TransientError(f"{SERVICE}: HTTP {status}")
    return PermanentError(f"{SERVICE}: HTTP {status}")


def _json_object(text) -> dict | None:
    try:
        data = json.loads(text)
    except (TypeError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def client_from_settings() -> AgentClient | None:
    """The configured agent, or None when CHAT_AGENT_URL is unset."""
    url = settings.CHAT_AGENT_URL
    if not url:
        return None
    timeouts = Timeouts(
        connect=settings.CHAT_AGENT_CONNECT_TIMEOUT_SECONDS,
        first_token=settings.CHAT_AGENT_FIRST_TOKEN_TIMEOUT_SECONDS,
        total=settings.CHAT_AGENT_TIMEOUT_SECONDS,
    )
    scheme = urlsplit(url).scheme
    if scheme in ("ws", "wss"):
        return WebSocketAgentClient(url, token=settings.CHAT_AGENT_TOKEN, timeouts=timeouts)
    if scheme in ("http", "https"):
        return AgentOSClient(url, agent_id=settings.CHAT_AGENT_ID, token=settings.CHAT_AGENT_TOKEN, timeouts=timeouts)
    raise ValueError("CHAT_AGENT_URL must start with ws://, wss://, http:// or https://")
