"""Writes of prototype generation: open, start, check (the processor's rules), finish, retry, cancel.

A prototype's states: queued (no V0 chat yet) → generating, with
awaiting_plan, interrupted and stale recorded while the processor acts on
them, until completed or failed. Every step is logged as a PrototypeEvent
(the progress stream's source of truth) and announced to open streams after
commit (prototypes.events). Calls to V0 happen outside transactions; each
write around them is one transaction that re-reads the row under a lock, so
concurrent checks (a relay ending, a scheduled check, a retried job) act once.
"""

import json
from dataclasses import dataclass
from datetime import datetime, timedelta

import structlog
from django.conf import settings
from django.core.cache import cache
from django.db import connection, transaction
from django.db.models import F
from django.template.loader import render_to_string
from django.utils import timezone

import jobs
from foundation.db import update_many
from integrations import v0
from jobs import PermanentError, SkipJob, TransientError
from prototypes import events, selectors
from prototypes.models import Prototype, PrototypeEvent
from prototypes.signals import prototype_checked, prototypes_finished

logger = structlog.get_logger(__name__)

CHECK_KIND = "prototypes.check"
READY_NOTE_KIND = "prototypes.ready_note"
READY_ALERT_KIND = "prototypes.ready_alert"
READY_EMAIL_KIND = "prototypes.ready_email"
FAILED_ALERT_KIND = "prototypes.failed_alert"
METADATA_KEY = "leadKey"  # our metadata on the V0 chat: finds the chat a lost answer created
CONTINUE_MESSAGE = "Continue from where you stopped and finish the prototype."
START_LOCK_SECONDS = 60
STARTING = "Starting your prototype"
CHAT_CREATED = "Your prototype is being generated"
NOT_CONFIGURED = "not configured: V0_API_KEY is empty"

VISITOR_FAILED = "We could not finish your prototype this time. Our team has been told and will be in touch."
VISITOR_UNAVAILABLE = "Prototype generation is not available right now. Our team will be in touch."
VISITOR_CANCELLED = "This prototype was stopped by our team. We will be in touch."


# --- events ---------------------------------------------------------------------------------
def prototype_event_add(*, prototype_id: int, kind: str, data: dict) -> PrototypeEvent:
    """Log one event (numbered per prototype) and announce it to open streams once committed.

    One statement numbers and inserts it (DML in WITH): every step of a generation
    and of the processor logs one, so this is on the path of every stream.
    """
    q = connection.ops.quote_name
    table, events_table = q(Prototype._meta.db_table), q(PrototypeEvent._meta.db_table)
    now = timezone.now()
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH numbered AS (UPDATE {table} SET events = events + 1 WHERE id = %s RETURNING id, events)"
            f" INSERT INTO {events_table} (prototype_id, number, kind, data, created_at)"
            " SELECT id, events, %s, %s::jsonb, %s FROM numbered RETURNING id, number",
            [prototype_id, kind, json.dumps(data), now],
        )
        pk, number = cursor.fetchone()
    event = PrototypeEvent(pk=pk, prototype_id=prototype_id, number=number, kind=kind, data=data, created_at=now)
    transaction.on_commit(lambda: events.announce([event]))
    return event


def _progress(prototype: Prototype, status: str, **extra) -> None:
    data = {"state": prototype.state, "status": status, "title": prototype.title, **extra}
    prototype_event_add(prototype_id=prototype.pk, kind=PrototypeEvent.Kind.PROGRESS, data=data)


# --- open, start ------------------------------------------------------------------------------
def prototype_open(*, lead) -> Prototype:
    """In the lead's transaction: its prototype, queued, with the processor's first check scheduled.

    The first check starts the generation if no browser ever opens the stream.
    """
    prototype, created = Prototype.objects.get_or_create(lead=lead)
    if created:
        _schedule_check(prototype, delay=settings.PROTOTYPES_CHECK_SECONDS)
    return prototype


def prototype_start(*, lead=None, prototype_id: int | None = None) -> Prototype:
    """Start the generation unless it has started: one V0 chat per lead, ever.

    queued → generating under a row lock, then the V0 chat is created (or, if
    this is not the first start, the one an earlier, lost answer created is
    found by our metadata; a first start has had no answer to lose). A transient
    V0 failure leaves it generating without a chat for the next check to
    start; a permanent one, or V0 not configured, fails the prototype.
    """
    with transaction.atomic():
        query = Prototype.objects.select_for_update().select_related("lead")
        prototype = query.get(lead=lead) if lead is not None else query.get(pk=prototype_id)
        if prototype.state != Prototype.State.QUEUED:
            return prototype
        now, first = timezone.now(), prototype.started_at is None
        _set_state(prototype, Prototype.State.GENERATING, started_at=now, generating_since=now)
        _progress(prototype, STARTING, step=0)
    _create_chat(prototype, first=first)
    prototype.refresh_from_db()
    return prototype


def _create_chat(prototype: Prototype, *, first: bool = False) -> None:
    client = v0.client_from_settings()
    if client is None:
        _fail_unconfigured(prototype.pk)
        return
    if not cache.add(_start_lock(prototype.pk), 1, START_LOCK_SECONDS):
        return  # another process is creating it right now
    try:
        request = _chat_request(prototype.pk, prototype.lead, first=first)
        chat_id = None if first else client.find_chat(metadata_key=METADATA_KEY, value=request.lead_key)
        message_id = ""
        if chat_id is None:
            chat_id, message_id = client.create_chat(
                message=request.prompt, system_prompt=settings.V0_SYSTEM_PROMPT, metadata=request.metadata
            )
    except (TransientError, PermanentError) as exc:
        prototype_start_failed(prototype_id=prototype.pk, error=exc)
        return
    finally:
        cache.delete(_start_lock(prototype.pk))
    with transaction.atomic():
        Prototype.objects.filter(pk=prototype.pk).update(chat_id=chat_id, message_id=message_id, last_error="")
        prototype.chat_id, prototype.message_id = chat_id, message_id
        _progress(prototype, CHAT_CREATED, step=0)
    logger.info("prototype_chat_created", prototype_id=prototype.pk)


def _start_lock(prototype_id: int) -> str:
    return f"prototypes:starting:{prototype_id}"


@dataclass(frozen=True)
class ChatRequest:
    """The V0 chat a start creates: its prompt and our metadata on it (how a lost answer's chat is found)."""

    prototype_id: int
    first: bool  # no earlier start: there is no lost answer to look for
    prompt: str
    lead_key: str

    @property
    def metadata(self) -> dict:
        return {METADATA_KEY: self.lead_key}


def _chat_request(prototype_id: int, lead, *, first: bool) -> ChatRequest:
    prompt = render_to_string("prototypes/prompt.txt", {"lead": lead, "steps": lead.steps}).strip()
    return ChatRequest(prototype_id=prototype_id, first=first, prompt=prompt, lead_key=str(lead.public_id))


def prototype_start_failed(*, prototype_id: int, error: TransientError | PermanentError) -> None:
    """A start's V0 call failed. Transient: it stays generating without a chat, for the next check to start
    (looking first for the chat a lost answer created); permanent: the prototype fails."""
    if isinstance(error, TransientError):
        logger.warning("prototype_start_deferred", prototype_id=prototype_id, error=str(error))
        Prototype.objects.filter(pk=prototype_id).update(last_error=f"transient: {error}"[:2000])
    else:
        _fail(prototype_id, error=f"permanent: {error}", visitor_message=VISITOR_FAILED)


@dataclass(frozen=True)
class Start:
    """Where a prototype stands after prototypes_start. `request` is set when that call started it and took
    its start lock: the caller creates the V0 chat, records the outcome (prototypes_chats_created or
    prototype_start_failed), then releases the lock (release_start_locks); a caller that dies meanwhile
    leaves the lock to expire and the start to the processor's next check."""

    state: str
    chat_id: str
    request: ChatRequest | None

    @property
    def is_terminal(self) -> bool:
        return self.state in Prototype.TERMINAL


def prototypes_start(*, prototype_ids: list[int]) -> tuple[dict[int, Start], list[PrototypeEvent]]:
    """prototype_start's first half for many prototypes at once, without the V0 call: every queued one →
    generating, logged; returns where each stands, and the events logged (the caller announces them).

    The progress stream's relays start a thousand generations at once when a thousand pages open: one
    statement moves and logs them all (DML in WITH), and the V0 calls are the caller's, awaited on the
    event loop. With V0 not configured each is prototype_start (which announces its own events).
    """
    if v0.client_from_settings() is None:
        prototypes = [prototype_start(prototype_id=pk) for pk in prototype_ids]
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
             PrototypeEvent.Kind.PROGRESS, STARTING, now],
        )  # fmt: skip
        rows = cursor.fetchall()
    logged = _logged([row[:4] for row in rows])
    first = {pk: is_first for pk, *_, is_first in rows}
    starts = {}
    for prototype in Prototype.objects.select_related("lead").filter(pk__in=prototype_ids):
        request = None
        if prototype.pk in first and cache.add(_start_lock(prototype.pk), 1, START_LOCK_SECONDS):
            request = _chat_request(prototype.pk, prototype.lead, first=first[prototype.pk])
        starts[prototype.pk] = Start(state=prototype.state, chat_id=prototype.chat_id, request=request)
    return starts, logged


def prototypes_chats_created(*, created: list[tuple[int, str, str]]) -> list[PrototypeEvent]:
    """The V0 chats that starts of prototypes_start created, `(prototype_id, chat_id, message_id)` each: kept
    and logged as _create_chat does, in one statement. Returns the logged events for the caller to
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
             PrototypeEvent.Kind.PROGRESS, CHAT_CREATED],
        )  # fmt: skip
        rows = cursor.fetchall()
    logger.info("prototype_chats_created", prototypes=len(rows))
    return _logged(rows)


def release_start_locks(*, prototype_ids: list[int]) -> None:
    """The start locks prototypes_start took, once the chats are recorded (or their calls failed)."""
    cache.delete_many([_start_lock(pk) for pk in prototype_ids])


def prototype_relay_steps_log(*, steps: list[tuple[int, str, int, str]]) -> list[PrototypeEvent]:
    """What the relays of V0 streams saw, `(prototype_id, status, step, title)` each: logged (and the title
    kept) for every prototype that has not ended; at most one step per prototype. Returns the logged
    events: the caller announces them (the relays, on the event loop, all at once).

    The relays' hot path (an event per V0 step per generation), written in batches
    (prototypes.stream.StepLog): one statement, in autocommit, numbers the events,
    keeps the titles and inserts the events of the whole batch (DML in WITH), instead
    of a locked read, two writes and a transaction per step; bench/sse measured the
    difference.
    """
    if not steps:
        return []
    ids = [prototype_id for prototype_id, *_ in steps]
    if len(set(ids)) != len(ids):
        raise ValueError("at most one step per prototype in a batch")
    q = connection.ops.quote_name
    table, events_table = q(Prototype._meta.db_table), q(PrototypeEvent._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            "WITH seen AS (SELECT * FROM unnest(%s::bigint[], %s::text[], %s::int[], %s::text[])"
            " AS s(id, status, step, title)),"
            f" numbered AS (UPDATE {table} p SET events = p.events + 1,"
            " title = CASE WHEN seen.title = '' THEN p.title ELSE seen.title END"
            " FROM seen WHERE p.id = seen.id AND p.state <> ALL(%s)"
            " RETURNING p.id, p.events, p.state, p.title, seen.status, seen.step)"
            f" INSERT INTO {events_table} (prototype_id, number, kind, data, created_at)"
            " SELECT id, events, %s, jsonb_build_object('state', state, 'status', status, 'title', title,"
            " 'step', step), clock_timestamp() FROM numbered RETURNING prototype_id, number, data::text, created_at",
            [ids, [status for _, status, _, _ in steps], [step for _, _, step, _ in steps],
             [title[:200] for *_, title in steps], list(Prototype.TERMINAL), PrototypeEvent.Kind.PROGRESS],
        )  # fmt: skip
        rows = cursor.fetchall()
    return _logged(rows)


def _logged(rows) -> list[PrototypeEvent]:
    """The progress events a statement logged, from its `prototype_id, number, data::text, created_at`."""
    kind = PrototypeEvent.Kind.PROGRESS
    return [
        PrototypeEvent(prototype_id=pk, number=number, kind=kind, data=json.loads(data), created_at=created_at)
        for pk, number, data, created_at in rows
    ]


# --- the processor ------------------------------------------------------------------------------
def prototype_check(*, prototype_id: int, check: int | None = None, now: datetime | None = None) -> Prototype:
    """One check by the processor; the rules of the flow, in order:

    no chat yet → start it; the latest message final and waiting on a plan →
    approve it; final with a preview → completed; final without a usable
    result (length, error…) → continue, at most PROTOTYPES_MAX_CONTINUE_ATTEMPTS,
    then failed; still generating (or final, no preview yet) longer than
    PROTOTYPES_STALE_SECONDS → stale: stop and continue, at most
    PROTOTYPES_MAX_RECOVERY_ATTEMPTS, then failed. Otherwise check again later.
    `check` is the number of the scheduled check running: only the latest one
    schedules the next. `now` is the clock (the stale rule's), for tests.
    Transient V0 errors propagate: the job layer retries this check. With V0
    not configured the prototype fails at once (no alert) and SkipJob says so.
    """
    prototype = Prototype.objects.select_related("lead").get(pk=prototype_id)
    if prototype.is_terminal:
        return prototype
    now = now or timezone.now()
    client = v0.client_from_settings()
    if client is None:
        _fail_unconfigured(prototype.pk)
        raise SkipJob(NOT_CONFIGURED)
    if prototype.state == Prototype.State.QUEUED:
        prototype = prototype_start(prototype_id=prototype.pk)
    elif not prototype.chat_id:
        _create_chat(prototype)
    else:
        _act_on_generation(prototype, client, now)
    prototype = _reloaded(prototype)
    if not prototype.is_terminal:
        with transaction.atomic():
            Prototype.objects.filter(pk=prototype.pk).update(last_checked_at=now)
            prototype_checked.send(sender=Prototype, prototype=prototype)  # the lead's hold lives on
            if check is None or check == prototype.checks:
                _schedule_check(prototype, delay=settings.PROTOTYPES_CHECK_SECONDS)
    return prototype


def prototypes_complete(*, previews: list[tuple[int, str]]) -> list[PrototypeEvent]:
    """Prototypes whose V0 generation a caller found finished, stopped and with a preview, `(prototype_id,
    preview url)` each: completed as _complete completes one (the progress stream's relays, once V0's
    stream of each ends, having read V0 on the event loop: a thousand end within seconds). One transaction
    and a statement per kind of write for all of them, prototypes_finished's receivers included.
    Returns the logged events: the caller announces them."""
    urls = dict(previews)
    now = timezone.now()
    with transaction.atomic():
        query = Prototype.objects.select_for_update().select_related("lead").filter(pk__in=urls)
        prototypes = list(query.exclude(state__in=Prototype.TERMINAL).order_by("pk"))
        logged = []
        for prototype in prototypes:
            prototype.preview_url = urls[prototype.pk]
            prototype.state, prototype.state_changed_at, prototype.finished_at = Prototype.State.COMPLETED, now, now
            prototype.events += 1  # the row is locked: numbered as prototype_event_add numbers it
            data = {"state": prototype.state, "previewUrl": prototype.preview_url, "title": prototype.title}
            logged.append(
                PrototypeEvent(
                    prototype=prototype, number=prototype.events, kind=PrototypeEvent.Kind.COMPLETE, data=data,
                    created_at=now,
                )
            )  # fmt: skip
        update_many(prototypes, ["preview_url", "state", "state_changed_at", "finished_at", "events"])
        PrototypeEvent.objects.bulk_create(logged)
        prototypes_finished.send(sender=Prototype, prototypes=prototypes)  # previews on the leads, quota consumed
        jobs.enqueue_many(
            [_job(kind, p) for p in prototypes for kind in (READY_ALERT_KIND, READY_NOTE_KIND, READY_EMAIL_KIND)]
        )
    logger.info("prototypes_completed", prototype_ids=[prototype.pk for prototype in prototypes])
    return logged


def _act_on_generation(prototype: Prototype, client: v0.V0Client, now: datetime) -> None:
    generation = client.latest_generation(prototype.chat_id)
    if generation.finished:
        if generation.awaiting_plan:
            _set_state_now(prototype, Prototype.State.AWAITING_PLAN)
            message_id = client.approve_plan(prototype.chat_id)
            _resume(prototype, message_id, "Plan approved: building your prototype", now=now)
            return
        if generation.finish_reason == "stop":
            if preview := client.preview(prototype.chat_id):
                _complete(prototype.pk, preview_url=preview.url)
                return
        elif generation.finish_reason == "content-filter":
            _fail(prototype.pk, error="V0 refused the request (content filter)", visitor_message=VISITOR_FAILED)
            return
        else:
            _set_state_now(prototype, Prototype.State.INTERRUPTED)
            if prototype.continue_attempts >= settings.PROTOTYPES_MAX_CONTINUE_ATTEMPTS:
                _fail(
                    prototype.pk,
                    error=f"interrupted ({generation.finish_reason}) after {prototype.continue_attempts} continues",
                    visitor_message=VISITOR_FAILED,
                )
                return
            message_id = client.send_message(prototype.chat_id, CONTINUE_MESSAGE)
            _resume(prototype, message_id, "Picking up where the generator stopped", now=now, continued=True)
            return
    if prototype.generating_since and now - prototype.generating_since > timedelta(
        seconds=settings.PROTOTYPES_STALE_SECONDS
    ):
        _set_state_now(prototype, Prototype.State.STALE)
        if prototype.recovery_attempts >= settings.PROTOTYPES_MAX_RECOVERY_ATTEMPTS:
            _fail(
                prototype.pk,
                error=f"stale after {prototype.recovery_attempts} recoveries",
                visitor_message=VISITOR_FAILED,
            )
            return
        if generation.message_id and not generation.finished:
            client.stop_message(prototype.chat_id, generation.message_id)
        message_id = client.send_message(prototype.chat_id, CONTINUE_MESSAGE)
        status = "This is taking longer than usual: restarting the last step"
        _resume(prototype, message_id, status, now=now, recovered=True)
    elif prototype.state != Prototype.State.GENERATING:
        _set_state_now(prototype, Prototype.State.GENERATING)


def _resume(prototype, message_id: str, status: str, *, now, continued=False, recovered=False) -> None:
    with transaction.atomic():
        locked = Prototype.objects.select_for_update().get(pk=prototype.pk)
        if locked.is_terminal:
            return
        _set_state(
            locked,
            Prototype.State.GENERATING,
            generating_since=now,
            message_id=message_id,
            continue_attempts=locked.continue_attempts + continued,
            recovery_attempts=locked.recovery_attempts + recovered,
        )
        _progress(locked, status)


def _complete(prototype_id: int, *, preview_url: str) -> None:
    """Completed, once: the preview saved on the lead and quota consumed (prototypes_finished), sales and the
    visitor told."""
    with transaction.atomic():
        prototype = Prototype.objects.select_for_update().select_related("lead").get(pk=prototype_id)
        if prototype.is_terminal:
            return
        prototype.preview_url = preview_url
        _set_state(prototype, Prototype.State.COMPLETED, finished_at=timezone.now())
        event = prototype_event_add(
            prototype_id=prototype.pk,
            kind=PrototypeEvent.Kind.COMPLETE,
            data={"state": prototype.state, "previewUrl": preview_url, "title": prototype.title},
        )
        prototype.events = event.number
        prototypes_finished.send(sender=Prototype, prototypes=[prototype])  # preview on the lead, quota consumed
        jobs.enqueue_many(
            [_job(READY_ALERT_KIND, prototype), _job(READY_NOTE_KIND, prototype), _job(READY_EMAIL_KIND, prototype)]
        )
    logger.info("prototype_completed", prototype_id=prototype_id)


def _fail(prototype_id: int, *, error: str, visitor_message: str, alert: bool = True) -> None:
    """Failed: the hold dropped without consuming quota (prototypes_finished), sales alerted, the visitor told."""
    with transaction.atomic():
        prototype = Prototype.objects.select_for_update().get(pk=prototype_id)
        if prototype.is_terminal:
            return
        prototype.last_error = error[:2000]
        _set_state(prototype, Prototype.State.FAILED, finished_at=timezone.now())
        event = prototype_event_add(
            prototype_id=prototype.pk,
            kind=PrototypeEvent.Kind.ERROR,
            data={"state": prototype.state, "message": visitor_message},
        )
        prototype.events = event.number
        prototypes_finished.send(sender=Prototype, prototypes=[prototype])  # the hold dropped, no quota
        if alert:
            jobs.enqueue_many([_job(FAILED_ALERT_KIND, prototype, suffix=str(event.number))])
    logger.warning("prototype_failed", prototype_id=prototype_id, error=error[:200])


def _fail_unconfigured(prototype_id: int) -> None:
    """V0 is off: the visitor is told and the hold dropped at once; sales need no alert for it."""
    _fail(prototype_id, error=NOT_CONFIGURED, visitor_message=VISITOR_UNAVAILABLE, alert=False)


# --- staff actions --------------------------------------------------------------------------------
def prototype_cancel(*, prototype_id: int, actor: str) -> bool:
    """Stop a prototype for good: its hold is dropped, no quota consumed, no alert (staff did it)."""
    prototype = Prototype.objects.get(pk=prototype_id)
    if prototype.is_terminal:
        return False
    _fail(prototype_id, error=f"cancelled by {actor}", visitor_message=VISITOR_CANCELLED, alert=False)
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
        _set_state(prototype, state, generating_since=timezone.now(), finished_at=None)
        _progress(prototype, "Trying again")
        _schedule_check(prototype, delay=0)
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
                _schedule_check(Prototype.objects.select_for_update().get(pk=prototype.pk), delay=0)
            counts["rescheduled"] += 1
        if progress:
            progress(done, len(stuck), counts)
    if counts["found"]:
        logger.warning("prototypes_recovered", **counts, dry_run=dry_run)
    return counts


# --- helpers ----------------------------------------------------------------------------------
def _set_state(prototype: Prototype, state: str, **fields) -> None:
    """Save a state change (and `fields`) on a row the caller holds."""
    if prototype.state != state:
        prototype.state = state
        prototype.state_changed_at = timezone.now()
    for name, value in fields.items():
        setattr(prototype, name, value)
    prototype.save(update_fields=["state", "state_changed_at", "last_error", "preview_url", *fields])


def _set_state_now(prototype: Prototype, state: str) -> None:
    """Record what the processor found before it acts, so a failed action leaves the truth behind."""
    if prototype.state == state:
        return
    with transaction.atomic():
        locked = Prototype.objects.select_for_update().get(pk=prototype.pk)
        if locked.is_terminal:
            return
        _set_state(locked, state)
        prototype.state = state


def _schedule_check(prototype: Prototype, *, delay: float) -> None:
    """The next check, numbered: its job key makes it one job however often this runs with that number."""
    with transaction.atomic():
        Prototype.objects.filter(pk=prototype.pk).update(checks=F("checks") + 1)
        prototype.checks = Prototype.objects.values_list("checks", flat=True).get(pk=prototype.pk)
        jobs.enqueue(
            CHECK_KIND,
            {"prototype_id": prototype.pk, "check": prototype.checks},
            key=selectors.check_key(prototype.pk, prototype.checks),  # the key prototypes_recover looks for
            run_after=timezone.now() + timedelta(seconds=delay),
        )


def _job(kind: str, prototype: Prototype, *, suffix: str = "") -> jobs.JobSpec:
    key = f"{kind}:{prototype.pk}" + (f":{suffix}" if suffix else "")
    return jobs.JobSpec(kind, {"prototype_id": prototype.pk}, key=key)


def _reloaded(prototype: Prototype) -> Prototype:
    return Prototype.objects.select_related("lead").get(pk=prototype.pk)


# --- data-subject requests (privacy/) ------------------------------------------------------------


@transaction.atomic
def subject_erase(*, prototype_ids) -> dict[str, int]:
    """Delete these prototypes with their event logs. {model label: rows deleted}."""
    return Prototype.objects.filter(pk__in=prototype_ids).delete()[1]
