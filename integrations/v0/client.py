"""V0 Platform API v2 (https://api.v0.dev/v2): prototype chats, their messages, plan approval, preview.

Shapes follow the API's OpenAPI document (vercel/v0-sdk, packages/v0-sdk/openapi.json):

- a chat carries no generation state of its own (v1's `latestVersion.status`
  and `demoUrl` are gone); the state is the latest assistant message, final
  once its `finishReason` is non-null, and the preview is
  `GET /chats/{id}/preview` (`{url, token, expiresAt}`, or null until ready);
- streaming endpoints answer `text/event-stream` whose frames are
  `data: <json>` told apart by `object`: `chat`, `chat.title`,
  `message.parts.chunk` (a jsondiffpatch delta against the message's parts),
  `message.usage`, `error`;
- a plan waiting for approval is an `agent-action` part named
  `exit_plan_mode`, resolved with the task
  `{"type": "plan-exit-response", "status": "approved", "content": …}`.

Sync calls go through HttpClient (timeouts, transient/permanent split,
host+path logging). The progress stream's relays, on the event loop, make
their calls over aiohttp with the same requests, answers and error mapping
(a thousand generations starting or ending at once cost no thread each):
`acreate_chat`, `afind_chat`, `alatest_generation`, `apreview` and the
streaming `resume_stream`.
"""

import functools
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

import aiohttp
import structlog
from django.conf import settings

from integrations.http import HttpClient, HttpTimeoutError, is_transient_status, parse_retry_after
from integrations.sse import sse_events
from jobs import PermanentError, TransientError

logger = structlog.get_logger(__name__)

PLAN_ACTION = "exit_plan_mode"
MAX_FRAME_BYTES = 1024 * 1024


@dataclass(frozen=True)
class Preview:
    url: str
    expires_at: str | None


@dataclass(frozen=True)
class Generation:
    """Where a chat's generation stands, read from its latest assistant message."""

    message_id: str | None
    finish_reason: str | None  # None while generating
    awaiting_plan: bool

    @property
    def finished(self) -> bool:
        return self.message_id is not None and self.finish_reason is not None


def awaits_plan_approval(parts: list) -> bool:
    """True when the message's last agent action is a plan the agent waits on."""
    actions = [p for p in parts or [] if isinstance(p, dict) and p.get("type") == "agent-action"]
    return bool(actions) and actions[-1].get("name") == PLAN_ACTION


class V0Client(HttpClient):
    service = "v0"

    def __init__(self, api_key: str, *, base_url: str = "https://api.v0.dev/v2", model: str = "v0-pro"):
        super().__init__(base_url)
        self.api_key = api_key
        self.model = model
        self.headers["Authorization"] = f"Bearer {api_key}"

    # --- chats --------------------------------------------------------------------
    def find_chat(self, *, metadata_key: str, value: str) -> str | None:
        """The id of a chat we created earlier with this metadata (a retry after a lost answer)."""
        return _found_chat(_json(self.get("chats", params=_find_params(metadata_key, value))))

    def create_chat(self, *, message: str, system_prompt: str = "", metadata: dict | None = None) -> tuple[str, str]:
        """POST /chats/async: the chat and its first assistant message start at once; returns (chatId, messageId)."""
        return _created(_json(self.post("chats/async", json=self._chat_body(message, system_prompt, metadata))))

    def _chat_body(self, message: str, system_prompt: str, metadata: dict | None) -> dict:
        body = {
            "message": message,
            "modelConfiguration": {"modelId": self.model, "imageGenerations": False},
            "privacy": "private",
        }
        if system_prompt:
            body["systemPrompt"] = system_prompt
        if metadata:
            body["metadata"] = metadata
        return body

    def latest_generation(self, chat_id: str) -> Generation:
        """GET /chats/{id}/messages: the newest assistant message decides."""
        return _generation(_json(self.get(f"chats/{chat_id}/messages", params={"limit": 20})))

    def approve_plan(self, chat_id: str, *, content: str = "Approved. Build it.") -> str:
        """POST /chats/{id}/messages/resolve/async with the plan-exit-response task; returns the new message id."""
        task = {"type": "plan-exit-response", "status": "approved", "content": content}
        return _message_id(self.post(f"chats/{chat_id}/messages/resolve/async", json={"task": task}))

    def send_message(self, chat_id: str, message: str) -> str:
        """POST /chats/{id}/messages/async (e.g. "continue"); returns the new assistant message id."""
        body = {"message": message, "modelConfiguration": {"modelId": self.model, "imageGenerations": False}}
        return _message_id(self.post(f"chats/{chat_id}/messages/async", json=body))

    def stop_message(self, chat_id: str, message_id: str) -> None:
        self.post(f"chats/{chat_id}/messages/{message_id}/stop")

    def preview(self, chat_id: str) -> Preview | None:
        return _preview(_json(self.get(f"chats/{chat_id}/preview")))

    # --- on the event loop (aiohttp) -----------------------------------------------
    async def afind_chat(self, *, metadata_key: str, value: str, session: aiohttp.ClientSession) -> str | None:
        """find_chat, awaited."""
        return _found_chat(await self._ajson(session, "GET", "chats", params=_find_params(metadata_key, value)))

    async def acreate_chat(
        self, *, message: str, system_prompt: str = "", metadata: dict | None = None, session: aiohttp.ClientSession
    ) -> tuple[str, str]:
        """create_chat, awaited: the same request and answer."""
        body = self._chat_body(message, system_prompt, metadata)
        return _created(await self._ajson(session, "POST", "chats/async", body=body))

    async def alatest_generation(self, chat_id: str, *, session: aiohttp.ClientSession) -> Generation:
        """latest_generation, awaited."""
        return _generation(await self._ajson(session, "GET", f"chats/{chat_id}/messages", params={"limit": 20}))

    async def apreview(self, chat_id: str, *, session: aiohttp.ClientSession) -> Preview | None:
        """preview, awaited."""
        return _preview(await self._ajson(session, "GET", f"chats/{chat_id}/preview"))

    def _aheaders(self, accept: str) -> dict:
        return {"Authorization": f"Bearer {self.api_key}", "Accept": accept, "User-Agent": settings.HTTP_USER_AGENT}

    async def _ajson(self, session: aiohttp.ClientSession, method: str, path: str, *, params=None, body=None):
        """One call's JSON answer, with HttpClient's timeouts, error mapping and log line."""
        url = urljoin(self.base_url, path)
        log = logger.bind(service=self.service, method=method, host=urlsplit(url).hostname, path=urlsplit(url).path)
        started = time.monotonic()
        timeout = aiohttp.ClientTimeout(sock_connect=self.timeout[0], sock_read=self.timeout[1])
        try:
            async with session.request(
                method, url, params=params, json=body, headers=self._aheaders("application/json"), timeout=timeout
            ) as response:
                log.info("http_request", status=response.status, duration_ms=_ms(started))
                _araise_for_status(response)
                answer = await response.read()
        except TimeoutError as exc:
            log.warning("http_timeout", duration_ms=_ms(started))
            raise HttpTimeoutError(f"{self.service}: timed out") from exc
        except aiohttp.ClientError as exc:
            log.warning("http_connection_error", duration_ms=_ms(started))
            raise TransientError(f"{self.service}: connection failed") from exc
        try:
            return json.loads(answer)
        except ValueError as exc:
            raise TransientError("v0: answer was not JSON") from exc

    async def resume_stream(self, chat_id: str, *, session: aiohttp.ClientSession) -> AsyncIterator[dict]:
        """POST /chats/{id}/resume: the active generation's frames as dicts; ends when the upstream closes.

        Same error mapping as HttpClient: timeouts, connection errors, 429 and
        5xx raise TransientError, other 4xx PermanentError; an `error` frame is
        yielded like any other, for the caller to decide.
        """
        url = urljoin(self.base_url, f"chats/{chat_id}/resume")
        log = logger.bind(service=self.service, method="POST", host=urlsplit(url).hostname, path=urlsplit(url).path)
        started = time.monotonic()
        timeout = aiohttp.ClientTimeout(sock_connect=self.timeout[0], sock_read=settings.V0_STREAM_IDLE_SECONDS)
        try:
            async with session.post(url, headers=self._aheaders("text/event-stream"), timeout=timeout) as response:
                log.info("http_request", status=response.status, duration_ms=_ms(started))
                _araise_for_status(response)
                async for frame in _sse_frames(response.content):
                    yield frame
        except TimeoutError as exc:
            log.warning("http_timeout", duration_ms=_ms(started))
            raise TransientError("v0: stream timed out") from exc
        except aiohttp.ClientError as exc:
            log.warning("http_connection_error", duration_ms=_ms(started))
            raise TransientError("v0: stream connection failed") from exc


async def _sse_frames(content: aiohttp.StreamReader) -> AsyncIterator[dict]:
    """Each event's data parsed as JSON, when it is an object; the frames are told apart by their `object`."""
    async for _event, data in sse_events(content, service="v0", max_bytes=MAX_FRAME_BYTES):
        try:
            frame = json.loads(data)
        except ValueError:
            continue  # not ours to fail on: the next frame or the processor tells
        if isinstance(frame, dict):
            yield frame


def _araise_for_status(response: aiohttp.ClientResponse) -> None:
    """HttpClient.raise_for_status for an aiohttp answer: 429 and 5xx transient, other 4xx permanent."""
    if is_transient_status(response.status):
        retry_after = parse_retry_after(response.headers.get("Retry-After"))
        raise TransientError(f"v0: HTTP {response.status}", retry_after=retry_after)
    if response.status >= 400:
        raise PermanentError(f"v0: HTTP {response.status}")


def _find_params(metadata_key: str, value: str) -> dict:
    return {f"metadata[{metadata_key}]": value, "limit": 1}


def _found_chat(body) -> str | None:
    chats = body.get("chats") if isinstance(body, dict) else None
    return chats[0]["id"] if chats and isinstance(chats[0], dict) and chats[0].get("id") else None


def _generation(body) -> Generation:
    messages = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(messages, list):
        raise TransientError("v0: message list without messages")
    assistant = [m for m in messages if isinstance(m, dict) and m.get("role") == "assistant"]
    if not assistant:
        return Generation(message_id=None, finish_reason=None, awaiting_plan=False)
    latest = max(assistant, key=lambda m: m.get("createdAt") or "")
    return Generation(
        message_id=latest.get("id"),
        finish_reason=latest.get("finishReason"),
        awaiting_plan=latest.get("finishReason") is not None and awaits_plan_approval(latest.get("parts")),
    )


def _preview(body) -> Preview | None:
    if not isinstance(body, dict) or not body.get("url"):
        return None
    return Preview(url=body["url"], expires_at=body.get("expiresAt"))


def _created(answer) -> tuple[str, str]:
    if not isinstance(answer, dict) or not answer.get("chatId") or not answer.get("messageId"):
        raise PermanentError("v0: chat created without chatId/messageId")
    return answer["chatId"], answer["messageId"]


def _json(response):
    try:
        return response.json()
    except ValueError as exc:
        raise TransientError("v0: answer was not JSON") from exc


def _message_id(response) -> str:
    body = _json(response)
    if not isinstance(body, dict) or not body.get("messageId"):
        raise PermanentError("v0: answer without messageId")
    return body["messageId"]


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def client_from_settings() -> V0Client | None:
    """None until V0_API_KEY is set: callers record what they would have done."""
    if not settings.V0_API_KEY:
        return None
    timeouts = (settings.HTTP_CONNECT_TIMEOUT, settings.HTTP_READ_TIMEOUT)  # read when a client is made
    return _shared_client(settings.V0_API_KEY, settings.V0_API_URL, settings.V0_MODEL, timeouts)


@functools.lru_cache(maxsize=4)
def _shared_client(api_key: str, base_url: str, model: str, timeouts: tuple) -> V0Client:
    # One per configuration, shared by the threads of a process (its pool is thread-safe): making one reads
    # the environment's proxies and CA bundle, which every relay and check would otherwise do again.
    return V0Client(api_key, base_url=base_url, model=model)
