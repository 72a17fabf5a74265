"""The progress stream: `GET /api/leads/<leadId>/generate-stream` (SSE), an async view under daphne.

The response coroutine only reads: the event log from the client's
Last-Event-ID, then new events as they are announced (prototypes.events),
with a heartbeat comment every PROTOTYPES_STREAM_HEARTBEAT_SECONDS. Django
cancels it when the client leaves, and nothing is lost with it.

What must finish runs elsewhere, in a relay: a task of this process detached
from any response, one per prototype. It starts the generation if nobody has
(a service call: one V0 chat per lead, ever), then relays V0's own stream of
it (`POST /chats/{id}/resume`) into the event log: one relay per prototype
across processes (a lease in the cache), shared by every tab that watches it,
carried on when they all close, and followed by a check of the prototype when
V0's stream ends. If the process dies, the processor's scheduled checks go on
from the log and V0.

The streams' reads and the relays' writes are made in batches (Batches): one
statement for the steps every relay saw (the starts, the opens…) while the
previous batch was being written, on a thread and connection of its own; each
relay waits for its step's row before it reads on, and the batch's events are
announced once committed. The V0 calls of a start and of a hand-over are
awaited on the loop.
"""

import asyncio
import json
import os
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import aiohttp
import structlog
from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.cache import cache
from django.db import close_old_connections
from django.http import HttpResponse, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from foundation import batching as foundation_batching
from foundation.api import error_body
from foundation.cache import touch_many
from foundation.client_ip import client_ip_bucket
from foundation.streams import held_while_sent, slots_take, too_many_streams
from foundation.throttling import window_waits
from integrations import v0
from integrations.v0.parts import apply_delta, describe_part
from jobs import PermanentError, TransientError
from prototypes import events, selectors, services
from prototypes.models import Prototype, PrototypeEvent
from prototypes.openapi import GenerateStreamDoc

logger = structlog.get_logger(__name__)

RELAY_LEASE_SECONDS = 60
COMPLETION_BATCH_MAX = 50
# Hand-overs under way at once in this process. Generations that end together (a thousand in the same second
# in bench/sse) would otherwise put two V0 reads each on the event loop at the same instant, and the live
# events of the streams still open would wait in the loop's queue behind all of their answers.
HANDOVERS_AT_ONCE = 16
TERMINAL_KINDS = (PrototypeEvent.Kind.COMPLETE, PrototypeEvent.Kind.ERROR)
SSE_HEADERS = {"Cache-Control": "no-cache, no-transform", "X-Accel-Buffering": "no"}


# The hand-overs that need the processor's full check (V0 calls and a dozen statements each: a generation
# that did not end with a preview) run on threads of their own, so that a burst of them does not queue the
# streams' own reads behind it; few, because that work is mostly Python: more threads only take the GIL
# from the event loop more often.
RELAY_THREADS = 4
_relay_executor = ThreadPoolExecutor(max_workers=RELAY_THREADS, thread_name_prefix="prototype-relay")


def _in_thread(func, *, executor=None):
    """ORM and cache calls of the stream and its relays, off the event loop: in the shared thread pool,
    or `executor`.

    The database connection goes back afterwards, as at the end of a request
    (to the pool, with PostgreSQL): these threads outlive any one stream.
    """

    def call(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        finally:
            close_old_connections()

    return sync_to_async(call, thread_sensitive=False, executor=executor)


# --- the view -------------------------------------------------------------------------------
@csrf_exempt  # it only reads; as with DRF's views, another method gets the JSON 405 below, not the CSRF page
async def generate_stream(request, lead_id):
    if request.method != "GET":
        return JsonResponse(error_body("method_not_allowed", "Use GET."), status=405, headers={"Allow": "GET"})
    after = _last_event_id(request)
    wait, prototype, lease = await stream_opens.run((client_ip_bucket(request) or "unknown", lead_id, after))
    if wait is not None:
        body = error_body("rate_limited", "Too many streams opened; try again in a minute.")
        return JsonResponse(body, status=429, headers={"Retry-After": str(int(wait) + 1)})
    if prototype is None:
        return JsonResponse(error_body("not_found", "No prototype here."), status=404)
    if _finished_for(prototype, after):
        return HttpResponse(status=204)  # nothing more will come: EventSource stops reconnecting
    if lease is None:
        return too_many_streams()
    if not prototype.is_terminal:
        relays.ensure(prototype)
    body = held_while_sent(_events(prototype, after), lease)
    return StreamingHttpResponse(body, content_type="text/event-stream", headers=SSE_HEADERS)


# drf-spectacular lists a URL whose view carries a DRF view class: this one describes generate_stream.
generate_stream.cls = GenerateStreamDoc
generate_stream.initkwargs = {}


def _open(opens: list[tuple[str, str, int]]) -> tuple[list, list]:
    """The streams' reads before they answer, `(client, lead id, Last-Event-ID)` each: the rate limit, the
    prototype (one query for all of them), then the slots of those that will stream (foundation.streams). (Seconds
    to wait or None, the prototype, its Lease or None when a cap is reached) each."""
    waits = window_waits([f"prototypes:stream:{client}" for client, _, _ in opens], settings.PROTOTYPES_STREAM_RATE)
    found = selectors.prototypes_for_public_leads(
        public_ids=[lead for (_, lead, _), wait in zip(opens, waits, strict=True) if wait is None]
    )
    prototypes = [
        found.get(_as_uuid(lead)) if wait is None else None for (_, lead, _), wait in zip(opens, waits, strict=True)
    ]
    streams, claims = [], []  # the opens that will stream, and the slots each takes
    for i, ((client, _, after), prototype) in enumerate(zip(opens, prototypes, strict=True)):
        if prototype is not None and not _finished_for(prototype, after):
            streams.append(i)
            claims.append(
                [
                    (f"prototypes:ip:{client}", settings.STREAMS_PER_IP),
                    (f"prototypes:lead:{prototype.pk}", settings.STREAMS_PER_LEAD),
                ]
            )
    leases = dict(zip(streams, slots_take(claims) if claims else [], strict=True))
    return [(wait, p, leases.get(i)) for i, (wait, p) in enumerate(zip(waits, prototypes, strict=True))], []


def _finished_for(prototype: Prototype, after: int) -> bool:
    """Nothing more will come to a client that has seen `after` events."""
    return prototype.is_terminal and after >= prototype.events


def _as_uuid(value: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value))
    except ValueError:
        return None


def _last_event_id(request) -> int:
    raw = request.headers.get("Last-Event-ID") or request.GET.get("lastEventId") or "0"
    return int(raw) if raw.isascii() and raw.isdigit() and len(raw) < 10 else 0  # "²" is a digit to isdigit


def _frame(number: int, kind: str, data: dict) -> bytes:
    return f"id: {number}\nevent: {kind}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


async def _events(prototype: Prototype, after: int):
    """Replay after `after`, then follow. Ends after `complete` or `error`, or after
    PROTOTYPES_STREAM_MAX_SECONDS (the browser reconnects with its Last-Event-ID).

    The log is read at once (what happened before we subscribed), on a gap in the
    numbers, and after a quiet spell: PROTOTYPES_STREAM_POLL_SECONDS while events of
    other processes cannot reach us (the channel layer is down), the heartbeat
    interval while they can. An event logged elsewhere while this process's relay goes on
    shows up as a gap at the relay's next event, so a stream that keeps hearing
    events in order has missed nothing and reads no log.
    """
    subscription = Subscription(prototype.pk)
    await subscription.open()
    try:
        yield b"retry: 3000\n\n"
        if prototype.is_terminal and after == 0 and prototype.state == Prototype.State.COMPLETED:
            # Done before this page opened: the outcome at once, as two events.
            data = {"state": prototype.state, "status": "Your prototype is ready", "title": prototype.title}
            yield _frame(prototype.events, PrototypeEvent.Kind.PROGRESS, data)
            yield _frame(prototype.events, PrototypeEvent.Kind.COMPLETE, _completion(prototype))
            return
        heartbeat = settings.PROTOTYPES_STREAM_HEARTBEAT_SECONDS
        quiet = heartbeat if subscription.crosses_processes else min(settings.PROTOTYPES_STREAM_POLL_SECONDS, heartbeat)
        deadline = time.monotonic() + settings.PROTOTYPES_STREAM_MAX_SECONDS
        last_sent = time.monotonic()
        next_read = 0.0  # read the log at once
        while time.monotonic() < deadline:
            pending = []
            message = await subscription.next(max(0.0, min(next_read, last_sent + heartbeat) - time.monotonic()))
            if message is not None and message["number"] == after + 1:
                pending = [message]
                next_read = time.monotonic() + quiet
            elif message is not None and message["number"] <= after:
                continue
            elif message is not None or time.monotonic() >= next_read:
                # A gap, or quiet for a while: the log has everything, in order.
                logged = await log_reads.run((prototype.pk, after))
                pending = [events.as_message(event) for event in logged]
                next_read = time.monotonic() + quiet
            for item in pending:
                yield _frame(item["number"], item["kind"], item["data"])
                after, last_sent = item["number"], time.monotonic()
                if item["kind"] in TERMINAL_KINDS:
                    return
            if time.monotonic() - last_sent >= heartbeat:
                yield b": keep-alive\n\n"
                last_sent = time.monotonic()
    finally:
        subscription.close()


def _completion(prototype: Prototype) -> dict:
    return {"state": prototype.state, "previewUrl": prototype.preview_url, "title": prototype.title}


class Subscription:
    """One stream's ear: the in-process hub, which the process's one layer listener also feeds with other
    processes' events (prototypes.events)."""

    def __init__(self, prototype_id: int):
        self.prototype_id = prototype_id
        self.crosses_processes = False
        self._queue: asyncio.Queue | None = None

    async def open(self):
        self._queue = events.hub.subscribe(self.prototype_id)
        try:
            await events.listener.ensure()
            self.crosses_processes = True
        except Exception as exc:  # the layer is down: this stream reads the log instead
            logger.warning("prototype_stream_layer_unavailable", error=type(exc).__name__)

    async def next(self, timeout: float) -> dict | None:
        if not self._queue.empty():
            return self._queue.get_nowait()
        try:
            async with asyncio.timeout(timeout):
                return await self._queue.get()
        except TimeoutError:
            return None

    def close(self):
        events.hub.unsubscribe(self.prototype_id, self._queue)


# --- the relay ---------------------------------------------------------------------------------
class Batches(foundation_batching.Batches):
    """foundation.batching's batches for the streams and relays of this process: `work(items)` returns a result
    per item and the events it logged, announced here once it returns (committed), on the event loop.

    So a thousand streams opening or relays starting at once cost a few statements, not a thread trip
    each, and never wait behind other work of the shared thread pool.
    """

    def batch_done(self, output) -> list:
        results, logged = output
        events.announce(logged)
        return results


def _log_steps(steps: list[tuple]) -> tuple[list, list]:
    return [None] * len(steps), services.prototype_relay_steps_log(steps=steps)


def _read_logs(after: list[tuple[int, int]]) -> tuple[list, list]:
    return selectors.prototypes_events_after(after=after), []


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
    services.prototype_start_failed(prototype_id=prototype_id, error=error)
    services.release_start_locks(prototype_ids=[prototype_id])


def _touch_leases(prototype_ids: list[int]) -> tuple[list, list]:
    return touch_many([_lease(prototype_id) for prototype_id in prototype_ids], timeout=RELAY_LEASE_SECONDS), []


def _complete(previews: list[tuple[int, str]]) -> tuple[list, list]:
    """The hand-overs that found the generation done: leases dropped, prototypes completed."""
    cache.delete_many([_lease(prototype_id) for prototype_id, _ in previews])
    return [None] * len(previews), services.prototypes_complete(previews=previews)


def _check(prototype_id: int) -> None:
    cache.delete(_lease(prototype_id))
    services.prototype_check(prototype_id=prototype_id)


stream_opens = Batches("prototype-stream-opens", _open)
log_reads = Batches("prototype-log-reads", _read_logs)
step_log = Batches("prototype-steps", _log_steps, key=lambda step: step[0])
starts = Batches("prototype-starts", _start)
chats_created = Batches("prototype-chats", _record_chats)
lease_touches = Batches("prototype-leases", _touch_leases)
# A completion is a dozen statements and the leads' receivers, mostly Python on that thread: in batches of
# a few dozen the event loop gets the GIL between them, while a thousand generations end together.
completions = Batches("prototype-completions", _complete, max_size=COMPLETION_BATCH_MAX)


class Relays:
    """The relays running in this process, one per prototype; tasks kept referenced (asyncio keeps only weak
    references) and never children of a response coroutine."""

    def __init__(self):
        self._tasks: dict[int, asyncio.Task] = {}
        self._handover_slots: tuple[asyncio.AbstractEventLoop, asyncio.Semaphore] | None = None

    def ensure(self, prototype: Prototype) -> None:
        if prototype.pk in self._tasks:
            return
        self._tasks[prototype.pk] = asyncio.get_running_loop().create_task(
            self._relay(prototype.pk), name=f"prototype-relay-{prototype.pk}"
        )

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
        """The V0 chat of a start this relay won, as services._create_chat makes it, on the loop; (chat id,
        whether this relay has the lease on relaying it)."""
        try:
            chat_id = None
            if not request.first:  # an earlier start's answer may have been lost: its chat is ours
                key = services.METADATA_KEY
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
        """For tests and shutdown: until the running relays have finished."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks.values()), return_exceptions=True)


relays = Relays()
