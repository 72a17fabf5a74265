"""The relay: the agent's events to the browser as SSE, the answer saved once whatever either side does.

The agent is read by a task of its own, not by the response coroutine: Django
cancels that coroutine when the browser leaves, and the answer must still be
read to its end (bounded by the agent client's timeouts) and saved. The task
puts what the browser should see on a queue; the response drains the queue.

SSE events sent to the browser:

    event: token   data: {"content": "<delta>"}
    event: done    data: {"messageId", "state": "complete", "content": "<full text>"}
    event: error   data: {"code", "message", "messageId", "state": "partial" | "failed"}
"""

import asyncio
import contextlib
import json

import structlog
from channels.db import DatabaseSyncToAsync

from chat import services
from chat.models import ChatMessage
from integrations.agent import AgentClient
from jobs import PermanentError, TransientError

logger = structlog.get_logger(__name__)

KEEPALIVE_SECONDS = 15.0
MAX_ANSWER_CHARS = 100_000  # an agent that runs on and on is cut here (and by its total timeout)
AGENT_UNAVAILABLE = "The assistant could not answer just now. Please try again in a moment."

# Relay tasks still running: the event loop keeps only weak references to tasks.
_running: set[asyncio.Task] = set()


def in_worker_thread(func):
    """The ORM call in the loop's thread pool, its database connection handed back as soon as it returns.

    Not in the request's thread (thread_sensitive=True): a streaming request keeps that thread, and the
    connection it opened, until the answer ends, so a pool would need a connection per chat in progress;
    and the relay outlives the request.
    """
    return DatabaseSyncToAsync(func, thread_sensitive=False)


def relay_start(*, client: AgentClient, session_pk: int, session_id: str, query: str, user_ip: str | None):
    """Start reading the agent's answer in its own task; return the queue of SSE frames for the browser."""
    frames: asyncio.Queue[tuple[str, dict]] = asyncio.Queue()
    task = asyncio.create_task(
        _relay(client, frames, session_pk=session_pk, session_id=session_id, query=query, user_ip=user_ip)
    )
    _running.add(task)
    task.add_done_callback(_running.discard)
    return frames


async def relays_finish(timeout: float) -> None:
    """Wait for the relays still reading an answer (tests and benchmarks; a server shutdown)."""
    if _running:
        await asyncio.wait(list(_running), timeout=timeout)


async def _relay(client, frames, *, session_pk, session_id, query, user_ip):
    parts: list[str] = []
    final: str | None = None
    metadata: dict = {}
    failure: dict | None = None
    try:
        said = 0
        async with contextlib.aclosing(client.run(query=query, session_id=session_id, user_ip=user_ip)) as events:
            async for event in events:
                if event.kind == "token":
                    said += len(event.content)
                    if said > MAX_ANSWER_CHARS:
                        failure = {"code": "answer_too_long", "detail": f"more than {MAX_ANSWER_CHARS} characters"}
                        break
                    parts.append(event.content)
                    frames.put_nowait(("token", {"content": event.content}))
                elif event.kind == "completed":
                    final, metadata = event.content or "".join(parts), event.metadata
                else:
                    failure = {"code": "agent_error", "detail": event.content}
    except (TransientError, PermanentError) as exc:
        failure = {"code": "agent_unavailable", "detail": str(exc)}
    except asyncio.CancelledError:
        # Only a server shutting down cancels a relay: keep what was said, then let the cancellation go on.
        await _save_answer(session_pk, "".join(parts), {"error": {"code": "interrupted"}}, failed=True)
        raise
    except Exception as exc:  # an agent that answers nonsense must not leave the visitor waiting
        logger.exception("chat_relay_failed", session_pk=session_pk)
        failure = {"code": "agent_unavailable", "detail": type(exc).__name__}

    if failure is None:
        content = final
    else:
        content, metadata = "".join(parts), {"error": failure}
    message = await _save_answer(session_pk, content, metadata, failed=failure is not None)
    if message is None:
        frames.put_nowait(("error", {"code": "not_saved", "message": AGENT_UNAVAILABLE, "state": "failed"}))
        return
    state = message.state
    if failure is None:
        frames.put_nowait(("done", {"messageId": message.pk, "state": state, "content": content}))
    else:
        frames.put_nowait(
            ("error", {"code": failure["code"], "message": AGENT_UNAVAILABLE, "messageId": message.pk, "state": state})
        )


async def _save_answer(session_pk: int, content: str, metadata: dict, *, failed: bool) -> ChatMessage | None:
    if not failed:
        state = ChatMessage.State.COMPLETE
    else:
        state = ChatMessage.State.PARTIAL if content else ChatMessage.State.FAILED
    try:
        message = await in_worker_thread(services.chat_answer_save)(
            session_pk=session_pk, content=content, metadata=metadata, state=state
        )
    except Exception:
        logger.exception("chat_answer_not_saved", session_pk=session_pk)
        return None
    logger.info("chat_answer_saved", session_pk=session_pk, state=state, chars=len(content))
    return message


def _frame(name: str, data: dict) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


async def sse_frames(frames: asyncio.Queue):
    """The response body: frames as they come, those already waiting sent together in one write.

    A comment line every KEEPALIVE_SECONDS keeps proxies from closing a quiet stream.
    """
    while True:
        try:
            name, data = frames.get_nowait()
        except asyncio.QueueEmpty:
            try:
                async with asyncio.timeout(KEEPALIVE_SECONDS):
                    name, data = await frames.get()
            except TimeoutError:
                yield b": keepalive\n\n"
                continue
        chunk = [_frame(name, data)]
        while name == "token" and not frames.empty():
            name, data = frames.get_nowait()
            chunk.append(_frame(name, data))
        yield b"".join(chunk)
        if name != "token":
            return
