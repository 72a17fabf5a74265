"""The relays of V0's streams: a task of this process per prototype, detached from any response.

A relay starts the generation if nobody has (one V0 chat per lead, ever),
then relays V0's own stream of it (`POST /chats/{id}/resume`) into the event
log: one relay per prototype across processes (a lease in the cache), shared
by every tab that watches it (prototypes.stream), carried on when they all
close, and followed by a check of the prototype when V0's stream ends. If the
process dies, the processor's scheduled checks go on from the log and V0.

The relays' writes are made in batches (prototypes.event_log.Batches): one
statement for the steps every relay saw (the starts, the chats created…)
while the previous batch was being written, on a thread and connection of its
own; each relay waits for its step's row before it reads on, and the batch's
events are announced once committed. The V0 calls of a start and of a
hand-over are awaited on the loop.
"""

import asyncio
import os
import time
from concurrent.futures import ThreadPoolExecutor

import aiohttp
import structlog
from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.cache import cache
from django.db import close_old_connections

from foundation.batching import Batches
from foundation.cache import touch_many
from integrations.v0 import client as v0
from integrations.v0.parts import apply_delta, describe_part
from jobs import PermanentError, TransientError
from prototypes import event_log, processor, services

logger = structlog.get_logger(__name__)

RELAY_LEASE_SECONDS = 60
COMPLETION_BATCH_MAX = 50
# Hand-overs under way at once in this process. Generations that end together (a thousand in the same second
# in bench/sse) would otherwise put two V0 reads each on the event loop at the same instant, and the live
# events of the streams still open would wait in the loop's queue behind all of their answers.
HANDOVERS_AT_ONCE = 16

# The hand-overs that need the processor's full check (V0 calls and a dozen statements each: a generation
# that did not end with a preview) run on threads of their own, so that a burst of them does not queue the
# streams' own reads behind it; few, because that work is mostly Python: more threads only take the GIL
# from the event loop more often.
RELAY_THREADS = 4
_relay_executor = ThreadPoolExecutor(max_workers=RELAY_THREADS, thread_name_prefix="prototype-relay")


def _in_thread(func, *, executor=None):
    """ORM and cache calls of the relays, off the event loop: in the shared thread pool, or `executor`.

    The database connection goes back afterwards, as at the end of a request
    (to the pool, with PostgreSQL): these threads outlive any one relay.
    """

    def call(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        finally:
            close_old_connections()

    return sync_to_async(call, thread_sensitive=False, executor=executor)


def _log_steps(steps: list[tuple]) -> tuple[list, list]:
    return [None] * len(steps), event_log.relay_steps_log(steps=steps)


def _lease(prototype_id: int) -> str:
    return f"prototypes:relay:{prototype_id}"


def _take_lease(prototype_id: int) -> bool:
    # Not taken: another process relays it, and its events reach us through the log and the layer.
    return cache.add(_lease(prototype_id), os.getpid(), RELAY_LEASE_SECONDS)


def _start(prototype_ids: list[int]) -> tuple[list, list]:
    """The relays' first step: start the generations nobody has started (services.prototypes_start), and
    take the lease on relaying those that already have a V0 chat. (Start, whether leased) each."""
    starts, logged = services.prototypes_start(prototype_ids=prototype_ids)
    results = []
    for prototype_id in prototype_ids:
        start = starts.get(prototype_id)
        relayable = start is not None and start.request is None and start.chat_id and not start.is_terminal
        results.append((start, relayable and _take_lease(prototype_id)))
    return results, logged


def _record_chats(created: list[tuple[int, str, str]]) -> tuple[list, list]:
    """The chats the relays' starts created: kept and logged, start locks released, leases taken."""
    logged = services.prototypes_chats_created(created=created)
    services.release_start_locks(prototype_ids=[prototype_id for prototype_id, _, _ in created])
    return [_take_lease(prototype_id) for prototype_id, _, _ in created], logged


def _start_failed(prototype_id: int, error: Exception) -> None:
    processor.prototype_start_failed(prototype_id=prototype_id, error=error)
    services.release_start_locks(prototype_ids=[prototype_id])


def _touch_leases(prototype_ids: list[int]) -> list:
    return touch_many([_lease(prototype_id) for prototype_id in prototype_ids], timeout=RELAY_LEASE_SECONDS)


def _complete(previews: list[tuple[int, str]]) -> tuple[list, list]:
    """The hand-overs that found the generation done: leases dropped, prototypes completed."""
    cache.delete_many([_lease(prototype_id) for prototype_id, _ in previews])
    return [None] * len(previews), processor.prototypes_complete(previews=previews)


def _check(prototype_id: int) -> None:
    cache.delete(_lease(prototype_id))
    processor.prototype_check(prototype_id=prototype_id)


step_log = event_log.Batches("prototype-steps", _log_steps, key=lambda step: step[0])
starts = event_log.Batches("prototype-starts", _start)
chats_created = event_log.Batches("prototype-chats", _record_chats)
lease_touches = Batches("prototype-leases", _touch_leases)
# A completion is a dozen statements and their jobs, mostly Python on that thread: in batches of
# a few dozen the event loop gets the GIL between them, while a thousand generations end together.
completions = event_log.Batches("prototype-completions", _complete, max_size=COMPLETION_BATCH_MAX)


class Relays:
    """The relays running in this process, one per prototype; tasks kept referenced (asyncio keeps only weak
    references) and never children of a response coroutine."""

    def __init__(self):
        self._tasks: dict[int, asyncio.Task] = {}
        # Every relay task until it ends, its hand-over included (it has left `_tasks` by then).
        self._running: set[asyncio.Task] = set()
        self._handover_slots: tuple[asyncio.AbstractEventLoop, asyncio.Semaphore] | None = None

    def ensure(self, prototype_id: int) -> None:
        if prototype_id in self._tasks:
            return
        task = asyncio.get_running_loop().create_task(self._relay(prototype_id), name=f"prototype-relay-{prototype_id}")
        self._tasks[prototype_id] = task
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def _relay(self, prototype_id: int) -> None:
        log = logger.bind(prototype_id=prototype_id)
        client, leased, chat_id = v0.client_from_settings(), False, ""
        async with aiohttp.ClientSession() as session:  # the relay's V0 calls, on the loop
            try:
                start, leased = await starts.run(prototype_id)
                chat_id = start.chat_id if start is not None else ""
                if start is not None and start.request is not None:
                    chat_id, leased = await self._create_chat(start.request, client, session)
                if leased:
                    await self._follow(prototype_id, chat_id, client, session)
            except (TransientError, PermanentError) as exc:
                log.warning("prototype_relay_ended", error=str(exc))
            except Exception:
                log.exception("prototype_relay_failed")
            finally:
                self._tasks.pop(prototype_id, None)
                if leased:
                    await self._hand_over(prototype_id, chat_id, client, session, log)

    def _slots(self) -> asyncio.Semaphore:
        """HANDOVERS_AT_ONCE slots for the hand-overs' V0 reads."""
        loop = asyncio.get_running_loop()  # a semaphore belongs to one loop (tests run several)
        if self._handover_slots is None or self._handover_slots[0] is not loop:
            self._handover_slots = (loop, asyncio.Semaphore(HANDOVERS_AT_ONCE))
        return self._handover_slots[1]

    async def _hand_over(self, prototype_id: int, chat_id: str, client, session, log) -> None:
        """V0's stream ended, so the generation may be done (or waiting on a plan): the check the processor
        would make. Done with a preview, the usual end, V0 is read on the loop and the completion batched;
        anything else is the processor's full check, on a thread."""
        try:
            async with self._slots():
                generation = await client.alatest_generation(chat_id, session=session)
                stopped = generation.finished and generation.finish_reason == "stop" and not generation.awaiting_plan
                preview = await client.apreview(chat_id, session=session) if stopped else None
            if preview is not None:
                await completions.run((prototype_id, preview.url))
                return
        except Exception as exc:  # the full check reads V0 again, with the job layer's retries behind it
            log.warning("prototype_relay_handover_deferred", error=type(exc).__name__)
        try:
            await _in_thread(_check, executor=_relay_executor)(prototype_id)
        except Exception:  # the scheduled checks carry on
            log.exception("prototype_relay_handover_failed")

    async def _create_chat(self, request, client, session) -> tuple[str, bool]:
        """The V0 chat of a start this relay won, as the processor's start makes it, on the loop; (chat id,
        whether this relay has the lease on relaying it)."""
        try:
            chat_id = None
            if not request.first:  # an earlier start's answer may have been lost: its chat is ours
                key = processor.METADATA_KEY
                chat_id = await client.afind_chat(metadata_key=key, value=request.lead_key, session=session)
            message_id = ""
            if chat_id is None:
                chat_id, message_id = await client.acreate_chat(
                    message=request.prompt,
                    system_prompt=settings.V0_SYSTEM_PROMPT,
                    metadata=request.metadata,
                    session=session,
                )
        except (TransientError, PermanentError) as exc:
            await _in_thread(_start_failed)(request.prototype_id, exc)
            return "", False
        return chat_id, await chats_created.run((request.prototype_id, chat_id, message_id))

    async def _follow(self, prototype_id, chat_id, client, session) -> None:
        parts: list = []
        title, shown = "", None
        renew_at = time.monotonic() + RELAY_LEASE_SECONDS / 3
        async for frame in client.resume_stream(chat_id, session=session):
            kind = frame.get("object")
            if kind == "chat.title" and isinstance(frame.get("delta"), str):
                title = frame["delta"]
            elif kind == "message.parts.chunk":
                parts = apply_delta(parts, frame.get("delta"))
                if not isinstance(parts, list):
                    parts = []
            elif kind == "error":
                logger.warning("prototype_stream_error_frame", prototype_id=prototype_id, code=frame.get("code"))
                return
            else:
                continue
            status = describe_part(parts[-1]) if parts else "Working on your prototype"
            if (status, len(parts), title) != shown:
                shown = (status, len(parts), title)
                await step_log.run((prototype_id, status, len(parts), title))
            if time.monotonic() >= renew_at:
                await lease_touches.run(prototype_id)
                renew_at = time.monotonic() + RELAY_LEASE_SECONDS / 3

    async def wait_all(self) -> None:
        """For tests and shutdown: until the running relays have finished, their hand-overs' checks included
        (which run on a thread that would otherwise still write after the caller went on)."""
        while self._running:
            await asyncio.gather(*self._running, return_exceptions=True)


relays = Relays()
