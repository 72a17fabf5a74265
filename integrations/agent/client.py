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
async view needs an asyncio client: aiohttp, the one the V0 stream uses, for
both the WebSocket and the SSE answer (integrations/sse.py). Proxies and the CA
bundle come from the environment as for HttpClient, read once.
"""

import asyncio
import contextlib
import functools
import json
import ssl
import time
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit, urlunsplit

import aiohttp
import structlog
from django.conf import settings
from requests.utils import get_environ_proxies

from integrations.http import environment_ca_bundle, is_transient_status
from integrations.sse import sse_events
from jobs import PermanentError, TransientError

logger = structlog.get_logger(__name__)

SERVICE = "agent"
RUN_CONTENT = "RunContent"
RUN_COMPLETED = "RunCompleted"
ENDING_EVENTS = {"RunError": "error", "RunCancelled": "error"}
MAX_FRAME_BYTES = 1024 * 1024
# A close that ends the conversation as agreed (normal closure, going away); any other is a dropped connection.
CLOSED_NORMALLY = (aiohttp.WSCloseCode.OK, aiohttp.WSCloseCode.GOING_AWAY)


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
        headers = {"User-Agent": settings.HTTP_USER_AGENT}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        return headers

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
        proxy, proxy_auth = _proxy_for(self.url)
        async with _session() as session:
            try:
                # The whole handshake (TCP, TLS, upgrade) within `connect`, as a socket connect alone would not be.
                async with asyncio.timeout(self.timeouts.connect):
                    websocket = await session.ws_connect(
                        self.url,
                        headers=self._headers(),
                        max_msg_size=MAX_FRAME_BYTES,
                        # Our own deadlines bound the run; keepalive pings would only add traffic.
                        heartbeat=None,
                        timeout=aiohttp.ClientWSTimeout(ws_receive=None, ws_close=2),
                        compress=0,  # deltas are a few bytes: deflate costs CPU and saves nothing
                        proxy=proxy,
                        proxy_auth=proxy_auth,
                        ssl=_ssl_context(),
                    )
            except (OSError, aiohttp.ClientError, TimeoutError) as exc:
                # A refused upgrade answers with its status; a 101 that breaks the protocol is a failed connection.
                if isinstance(exc, aiohttp.WSServerHandshakeError) and exc.status != 101:
                    raise _status_error(exc.status) from exc
                self.log.warning("agent_connection_error", error=type(exc).__name__)
                raise TransientError(f"{SERVICE}: connection failed") from exc
            async with websocket:
                if after is not None:
                    await after
                await websocket.send_str(json.dumps({"query": query, "session_id": session_id, "user_ip": user_ip}))
                while True:
                    message = await websocket.receive()
                    if message.type in (aiohttp.WSMsgType.TEXT, aiohttp.WSMsgType.BINARY):
                        data = _json_object(message.data)
                        if data is not None:
                            yield data
                    elif message.type == aiohttp.WSMsgType.CLOSE and message.data in CLOSED_NORMALLY:
                        return
                    else:  # closed with an error code, cut without a close frame, or a frame over MAX_FRAME_BYTES
                        self.log.warning("agent_connection_closed", code=websocket.close_code)
                        raise TransientError(f"{SERVICE}: connection dropped")


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
        proxy, proxy_auth = _proxy_for(self.url)
        timeout = aiohttp.ClientTimeout(total=self.timeouts.total, connect=self.timeouts.connect)
        async with _session() as session:
            try:
                async with session.post(
                    self.url,
                    data=form,
                    headers=self._headers(),
                    timeout=timeout,
                    allow_redirects=False,  # a redirected run is not an event stream: answered as such below
                    proxy=proxy,
                    proxy_auth=proxy_auth,
                    ssl=_ssl_context(),
                ) as response:
                    if response.status >= 400:
                        raise _status_error(response.status)
                    if response.content_type != "text/event-stream":  # not an AgentOS run endpoint
                        raise PermanentError(f"{SERVICE}: not an event stream")
                    async for event, text in sse_events(response.content, service=SERVICE, max_bytes=MAX_FRAME_BYTES):
                        data = _json_object(text)
                        if data is not None:
                            data.setdefault("event", event)
                            yield data
            except TimeoutError:  # aiohttp's own timeouts too: the run reports them as timed out
                raise
            except aiohttp.ClientError as exc:  # connection refused or reset, a body cut short
                self.log.warning("agent_connection_error", error=type(exc).__name__)
                raise TransientError(f"{SERVICE}: connection failed") from exc


def _session() -> aiohttp.ClientSession:
    """A session for one run; no cookies kept, and proxies come from _proxy_for rather than from every request."""
    return aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar(), trust_env=False)


@functools.lru_cache(maxsize=8)
def _proxy_for(url: str) -> tuple[str | None, aiohttp.BasicAuth | None]:
    """The egress proxy the environment names for `url` (a WebSocket URL as its HTTP counterpart), as requests
    reads it, with its credentials apart; worked out once: reading the environment on every connection is a
    measurable part of a chat's start under load."""
    parts = urlsplit(url)
    scheme = {"ws": "http", "wss": "https"}.get(parts.scheme, parts.scheme)
    proxies = get_environ_proxies(urlunsplit((scheme, *parts[1:])))
    proxy = proxies.get(scheme) or proxies.get("all")
    if not proxy:
        return None, None
    proxy_parts = urlsplit(proxy)
    auth = None
    if proxy_parts.username:
        auth = aiohttp.BasicAuth(unquote(proxy_parts.username), unquote(proxy_parts.password or ""))
    return urlunsplit(proxy_parts._replace(netloc=proxy_parts.netloc.rpartition("@")[2])), auth


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
