"""The progress stream: `GET /api/leads/<leadId>/generate-stream` (SSE), an async view under daphne.

The response coroutine only reads: the event log from the client's
Last-Event-ID, then new events as they are announced (prototypes.broadcast),
with a heartbeat comment every PROTOTYPES_STREAM_HEARTBEAT_SECONDS. Django
cancels it when the client leaves, and nothing is lost with it: what must
finish runs in the prototype's relay (prototypes.relay), which the view
makes sure of.

The streams' reads are made in batches (foundation.batching): one statement
for the opens (or the log reads) of every stream that came while the
previous batch was being read, on a thread and connection of its own.
"""

import asyncio
import json
import time
import uuid

import structlog
from django.conf import settings
from django.http import HttpResponse, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from foundation.api import error_body
from foundation.batching import Batches
from foundation.client_ip import client_ip_bucket
from foundation.streams import held_while_sent, slots_take, too_many_streams
from foundation.throttling import window_waits
from prototypes import broadcast, selectors
from prototypes.models import Prototype, PrototypeEvent
from prototypes.openapi import GenerateStreamDoc
from prototypes.relay import relays

logger = structlog.get_logger(__name__)

TERMINAL_KINDS = (PrototypeEvent.Kind.COMPLETE, PrototypeEvent.Kind.ERROR)
# While the channel layer cannot be reached, a stream reads the event log after this long without news.
EVENT_LOG_POLL_SECONDS = 1.0
SSE_HEADERS = {"Cache-Control": "no-cache, no-transform", "X-Accel-Buffering": "no"}


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
        relays.ensure(prototype.pk)
    body = held_while_sent(_events(prototype, after), lease)
    return StreamingHttpResponse(body, content_type="text/event-stream", headers=SSE_HEADERS)


# drf-spectacular lists a URL whose view carries a DRF view class: this one describes generate_stream.
generate_stream.cls = GenerateStreamDoc
generate_stream.initkwargs = {}


def _open(opens: list[tuple[str, str, int]]) -> list:
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
    return [(wait, p, leases.get(i)) for i, (wait, p) in enumerate(zip(waits, prototypes, strict=True))]


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
    numbers, and after a quiet spell: EVENT_LOG_POLL_SECONDS while events of
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
        quiet = heartbeat if subscription.crosses_processes else min(EVENT_LOG_POLL_SECONDS, heartbeat)
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
                pending = [broadcast.as_message(event) for event in logged]
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
    processes' events (prototypes.broadcast)."""

    def __init__(self, prototype_id: int):
        self.prototype_id = prototype_id
        self.crosses_processes = False
        self._queue: asyncio.Queue | None = None

    async def open(self):
        self._queue = broadcast.hub.subscribe(self.prototype_id)
        try:
            await broadcast.listener.ensure()
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
        broadcast.hub.unsubscribe(self.prototype_id, self._queue)


def _read_logs(after: list[tuple[int, int]]) -> list:
    return selectors.prototypes_events_after(after=after)


stream_opens = Batches("prototype-stream-opens", _open)
log_reads = Batches("prototype-log-reads", _read_logs)
