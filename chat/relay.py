"""The relay: the agent's events to the browser as SSE, the answer saved once whatever either side does.

The agent is read by a task of its own, not by the response coroutine: Django
cancels that coroutine when the browser leaves, and the answer must still be
read to its end (bounded by the agent client's timeouts) and saved. The task
puts what the browser should see on a queue, as SSE frames ready to send; the
response drains the queue. It starts with the view and waits for the
admission (chat.admission), told as soon as Redis answers, before the
visitor's message is saved: the agent's WebSocket connects while the message
is saved, and the agent is asked once it is (nothing is asked, nor kept, if the
chat was refused or saving failed).

Redis and the database are reached in batches (foundation.batching): the
chats starting (their admissions on one thread, their turns on another,
chat.api), and the answers ending, within one trip of a batch's thread share
its round trips.
Each chat's own trip to a thread costs the event loop far more than its
statements do: every hand-over of the GIL between the loop and a worker thread
waits on a busy loop, and a hundred chats starting at once would each pay it
several times (bench/chat).

SSE events sent to the browser:

    event: token   data: {"content": "<delta>"}
    event: done    data: {"messageId", "state": "complete", "content": "<full text>"}
    event: error   data: {"code", "message", "messageId", "state": "partial" | "failed"}
"""

import asyncio
import contextlib
import json
from json.encoder import encode_basestring_ascii

import structlog

from chat import services
from chat.models import ChatMessage
from foundation.batching import Batches
from integrations.agent.client import AgentClient
from jobs import PermanentError, TransientError

logger = structlog.get_logger(__name__)

KEEPALIVE_SECONDS = 15.0  # the longest a stream stays silent
KEEPALIVE = b": keepalive\n\n"
END = None  # after the last frame of an answer
MAX_ANSWER_CHARS = 100_000  # an agent that runs on and on is cut here (and by its total timeout)
AGENT_UNAVAILABLE = "The assistant could not answer just now. Please try again in a moment."

# Relay tasks still running: the event loop keeps only weak references to tasks.
_running: set[asyncio.Task] = set()

# The answers of the chats ending while the previous batch is written, saved together (one statement).
_answers = Batches("chat-answers", services.chat_answers_save)


def relay_start(
    *,
    client: AgentClient,
    admitted: asyncio.Future,
    turn: asyncio.Future,
    session_id: str,
    query: str,
    user_ip: str | None,
) -> asyncio.Queue:
    """Start reading the agent's answer in its own task: the agent's connection opened once `admitted` is True
    (the chat may stream; nothing is done when False), the agent asked once `turn` (the visitor's message being
    saved) is done; return the queue of SSE frames for the browser. Started before either is known, so that the
    connection opens on the admission's word, without the view's wake-up in between."""
    frames: asyncio.Queue[bytes | None] = asyncio.Queue()
    relay = _relay(client, frames, admitted=admitted, turn=turn, session_id=session_id, query=query, user_ip=user_ip)
    task = asyncio.create_task(relay)
    _running.add(task)
    task.add_done_callback(_running.discard)
    return frames


async def relays_finish(timeout: float) -> None:
    """Wait for the relays still reading an answer (tests and benchmarks; a server shutdown)."""
    if _running:
        await asyncio.wait(list(_running), timeout=timeout)


async def _relay(client, frames, *, admitted, turn, session_id, query, user_ip):
    if not await admitted:
        return  # refused: the view answers so, nothing is asked nor kept
    parts: list[str] = []
    final: str | None = None
    metadata: dict = {}
    failure: dict | None = None
    try:
        said = 0
        answer = client.run(query=query, session_id=session_id, user_ip=user_ip, after=turn)
        async with contextlib.aclosing(answer) as events:
            async for event in events:
                if event.kind == "token":
                    said += len(event.content)
                    if said > MAX_ANSWER_CHARS:
                        failure = {"code": "answer_too_long", "detail": f"more than {MAX_ANSWER_CHARS} characters"}
                        break
                    parts.append(event.content)
                    frames.put_nowait(_token_frame(event.content))
                elif event.kind == "completed":
                    final, metadata = event.content or "".join(parts), event.metadata
                else:
                    failure = {"code": "agent_error", "detail": event.content}
    except (TransientError, PermanentError) as exc:
        failure = {"code": "agent_unavailable", "detail": str(exc)}
    except asyncio.CancelledError:
        # Only a server shutting down cancels a relay: keep what was said, then let the cancellation go on.
        if _saved(turn):
            session_pk = turn.result().session_id
            await _save_answer(session_pk, "".join(parts), {"error": {"code": "interrupted"}}, failed=True)
        raise
    except Exception as exc:  # an agent that answers nonsense must not leave the visitor waiting
        if turn.done() and not _saved(turn):
            return  # the message was not saved: the view answered so, and the agent was not asked
        logger.exception("chat_relay_failed", session_id=session_id)
        failure = {"code": "agent_unavailable", "detail": type(exc).__name__}

    try:
        session_pk = (await turn).session_id
    except Exception:
        return  # the agent could not be reached while the message was not saved either: nothing to keep
    if failure is None:
        content = final
    else:
        content, metadata = "".join(parts), {"error": failure}
    message = await _save_answer(session_pk, content, metadata, failed=failure is not None)
    if message is None:
        frames.put_nowait(_frame("error", {"code": "not_saved", "message": AGENT_UNAVAILABLE, "state": "failed"}))
    elif failure is None:
        frames.put_nowait(_frame("done", {"messageId": message.pk, "state": message.state, "content": content}))
    else:
        error = {"code": failure["code"], "message": AGENT_UNAVAILABLE, "messageId": message.pk, "state": message.state}
        frames.put_nowait(_frame("error", error))
    frames.put_nowait(END)


def _saved(turn: asyncio.Future) -> bool:
    return turn.done() and not turn.cancelled() and turn.exception() is None


async def _save_answer(session_pk: int, content: str, metadata: dict, *, failed: bool) -> ChatMessage | None:
    if not failed:
        state = ChatMessage.State.COMPLETE
    else:
        state = ChatMessage.State.PARTIAL if content else ChatMessage.State.FAILED
    try:
        message = await _answers.run(services.Answer(session_pk, content, metadata, state))
    except Exception:
        logger.exception("chat_answer_not_saved", session_pk=session_pk)
        return None
    logger.info("chat_answer_saved", session_pk=session_pk, state=state, chars=len(content))
    return message


_compact_json = json.JSONEncoder(separators=(",", ":")).encode


def _frame(name: str, data: dict) -> bytes:
    return f"event: {name}\ndata: {_compact_json(data)}\n\n".encode()


def _token_frame(content: str) -> bytes:
    """_frame("token", {"content": content}), byte for byte, without a dict and an encoder run per delta."""
    return b'event: token\ndata: {"content":%s}\n\n' % encode_basestring_ascii(content).encode()


async def sse_frames(frames: asyncio.Queue):
    """The response body: frames as they come, those already waiting sent together in one write.

    A comment line after at most KEEPALIVE_SECONDS of silence keeps proxies from closing a quiet stream: a
    timer checks every half of that whether anything was sent since it last looked (one timer per half
    period, where a timeout around each wait for a frame would cost one per delta).
    """
    loop = asyncio.get_running_loop()
    sent = False

    def keepalive():
        nonlocal sent, timer
        if not sent:
            frames.put_nowait(KEEPALIVE)
        sent = False
        timer = loop.call_later(KEEPALIVE_SECONDS / 2, keepalive)

    timer = loop.call_later(KEEPALIVE_SECONDS / 2, keepalive)
    try:
        while True:
            frame = await frames.get()
            chunk = []
            while frame is not END:
                chunk.append(frame)
                if frames.empty():
                    break
                frame = frames.get_nowait()
            if chunk:
                sent = True
                yield b"".join(chunk)
            if frame is END:
                return
    finally:
        timer.cancel()
