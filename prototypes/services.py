"""Writes others make on prototypes: open one with its lead, the relays' starts of many at once, staff
actions (cancel, retry), the safety net, and erasure. The processor (prototypes.processor) does the rest.
"""

from dataclasses import dataclass
from datetime import datetime

import structlog
from django.conf import settings
from django.core.cache import cache
from django.db import connection, transaction
from django.utils import timezone

from integrations.v0 import client as v0
from prototypes import event_log, processor, selectors
from prototypes.models import Prototype, PrototypeEvent

logger = structlog.get_logger(__name__)


# --- open ---------------------------------------------------------------------------------------
def prototype_open(*, lead_id: int) -> Prototype:
    """In the lead's transaction: its prototype, queued, with the processor's first check scheduled.

    The first check starts the generation if no browser ever opens the stream.
    """
    prototype, created = Prototype.objects.get_or_create(lead_id=lead_id)
    if created:
        processor.schedule_check(prototype, delay=settings.PROTOTYPES_CHECK_SECONDS)
    return prototype


# --- the relays' starts ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Start:
    """Where a prototype stands after prototypes_start. `request` is set when that call started it and took
    its start lock: the caller creates the V0 chat, records the outcome (prototypes_chats_created or
    processor.prototype_start_failed), then releases the lock (release_start_locks); a caller that dies
    meanwhile leaves the lock to expire and the start to the processor's next check."""

    state: str
    chat_id: str
    request: processor.ChatRequest | None

    @property
    def is_terminal(self) -> bool:
        return self.state in Prototype.TERMINAL


def prototypes_start(*, prototype_ids: list[int]) -> tuple[dict[int, Start], list[PrototypeEvent]]:
    """processor.prototype_start's first half for many prototypes at once, without the V0 call: every
    queued one → generating, logged; returns where each stands, and the events logged (the caller
    announces them).

    The progress stream's relays start a thousand generations at once when a thousand pages open: one
    statement moves and logs them all (DML in WITH), and the V0 calls are the caller's, awaited on the
    event loop. With V0 not configured each is processor.prototype_start (which announces its own events).
    """
    if v0.client_from_settings() is None:
        prototypes = [processor.prototype_start(prototype_id=pk) for pk in prototype_ids]
        return {p.pk: Start(state=p.state, chat_id=p.chat_id, request=None) for p in prototypes}, []
    q = connection.ops.quote_name
    table, events_table = q(Prototype._meta.db_table), q(PrototypeEvent._meta.db_table)
    now = timezone.now()
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH queued AS (SELECT id, started_at FROM {table} WHERE id = ANY(%s) AND state = %s FOR UPDATE),"
            f" started AS (UPDATE {table} p SET state = %s, state_changed_at = %s, started_at = %s,"
            " generating_since = %s, events = p.events + 1 FROM queued WHERE p.id = queued.id"
            " RETURNING p.id, p.events, p.state, p.title, queued.started_at IS NULL AS first),"
            f" logged AS (INSERT INTO {events_table} (prototype_id, number, kind, data, created_at)"
            " SELECT id, events, %s, jsonb_build_object('state', state, 'status', %s::text, 'title', title,"
            " 'step', 0), %s FROM started RETURNING prototype_id, number, data::text AS data, created_at)"
            " SELECT logged.prototype_id, logged.number, logged.data, logged.created_at, started.first"
            " FROM logged JOIN started ON started.id = logged.prototype_id",
            [list(prototype_ids), Prototype.State.QUEUED, Prototype.State.GENERATING, now, now, now,
             PrototypeEvent.Kind.PROGRESS, processor.STARTING, now],
        )  # fmt: skip
        rows = cursor.fetchall()
    logged = event_log.progress_logged([row[:4] for row in rows])
    first = {pk: is_first for pk, *_, is_first in rows}
    starts = {}
    for prototype in Prototype.objects.select_related("lead").filter(pk__in=prototype_ids):
        request = None
        if prototype.pk in first and cache.add(processor.start_lock(prototype.pk), 1, processor.START_LOCK_SECONDS):
            request = processor.chat_request(prototype.pk, prototype.lead, first=first[prototype.pk])
        starts[prototype.pk] = Start(state=prototype.state, chat_id=prototype.chat_id, request=request)
    return starts, logged


def prototypes_chats_created(*, created: list[tuple[int, str, str]]) -> list[PrototypeEvent]:
    """The V0 chats that starts of prototypes_start created, `(prototype_id, chat_id, message_id)` each: kept
    and logged as the processor's start keeps one, in one statement. Returns the logged events for the caller to
    announce."""
    if not created:
        return []
    q = connection.ops.quote_name
    table, events_table = q(Prototype._meta.db_table), q(PrototypeEvent._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            "WITH created AS (SELECT * FROM unnest(%s::bigint[], %s::text[], %s::text[])"
            " AS c(id, chat_id, message_id)),"
            f" numbered AS (UPDATE {table} p SET chat_id = created.chat_id, message_id = created.message_id,"
            " last_error = '', events = p.events + 1 FROM created WHERE p.id = created.id"
            " RETURNING p.id, p.events, p.state, p.title)"
            f" INSERT INTO {events_table} (prototype_id, number, kind, data, created_at)"
            " SELECT id, events, %s, jsonb_build_object('state', state, 'status', %s::text, 'title', title, 'step', 0),"
            " clock_timestamp() FROM numbered RETURNING prototype_id, number, data::text, created_at",
            [[pk for pk, _, _ in created], [chat for _, chat, _ in created], [message for *_, message in created],
             PrototypeEvent.Kind.PROGRESS, processor.CHAT_CREATED],
        )  # fmt: skip
        rows = cursor.fetchall()
    logger.info("prototype_chats_created", prototypes=len(rows))
    return event_log.progress_logged(rows)


def release_start_locks(*, prototype_ids: list[int]) -> None:
    """The start locks prototypes_start took, once the chats are recorded (or their calls failed)."""
    cache.delete_many([processor.start_lock(pk) for pk in prototype_ids])


# --- staff actions, the safety net -------------------------------------------------------------
def prototype_cancel(*, prototype_id: int, actor: str) -> bool:
    """Stop a prototype for good: its hold is dropped, no quota consumed, no alert (staff did it)."""
    prototype = Prototype.objects.get(pk=prototype_id)
    if prototype.is_terminal:
        return False
    error, message = f"cancelled by {actor}", processor.VISITOR_CANCELLED
    processor.fail(prototype_id, error=error, visitor_message=message, alert=False)
    return True


def prototype_retry(*, prototype_id: int, actor: str) -> bool:
    """Give a failed prototype another go on its own V0 chat (or a first one), checked at once."""
    with transaction.atomic():
        prototype = Prototype.objects.select_for_update().get(pk=prototype_id)
        if prototype.state != Prototype.State.FAILED:
            return False
        prototype.continue_attempts = prototype.recovery_attempts = 0
        prototype.last_error = f"retried by {actor}"
        state = Prototype.State.GENERATING if prototype.chat_id else Prototype.State.QUEUED
        processor.state_set(prototype, state, generating_since=timezone.now(), finished_at=None)
        event_log.progress(prototype, "Trying again")
        processor.schedule_check(prototype, delay=0)
    return True


def prototypes_recover(*, since: datetime, dry_run: bool = False, progress=None) -> dict:
    """Re-schedule a check for every unfinished prototype created since `since` whose checks stopped.

    A safety net (the hourly beat task and `manage.py prototypes_recover`):
    normally each check schedules the next. "Stopped" means no check due:
    none pending in the job table for its latest check number.
    """
    stuck = selectors.prototypes_without_pending_check(since=since)
    counts = {"found": len(stuck), "rescheduled": 0}
    for done, prototype in enumerate(stuck, start=1):
        if not dry_run:
            with transaction.atomic():
                processor.schedule_check(Prototype.objects.select_for_update().get(pk=prototype.pk), delay=0)
            counts["rescheduled"] += 1
        if progress:
            progress(done, len(stuck), counts)
    if counts["found"]:
        logger.warning("prototypes_recovered", **counts, dry_run=dry_run)
    return counts


# --- data-subject requests (privacy/) ------------------------------------------------------------


@transaction.atomic
def subject_erase(*, prototype_ids) -> dict[str, int]:
    """Delete these prototypes with their event logs. {model label: rows deleted}."""
    return Prototype.objects.filter(pk__in=prototype_ids).delete()[1]
