"""The processor: how a prototype goes from queued to completed or failed.

A prototype's states: queued (no V0 chat yet) → generating, with
awaiting_plan, interrupted and stale recorded while the processor acts on
them, until completed or failed. Every step is logged in the event log
(prototypes.event_log), the progress stream's source of truth. Calls to V0
happen outside transactions; each write around them is one transaction that
re-reads the row under a lock, so concurrent checks (a relay ending, a
scheduled check, a retried job) act once.

The app above (leadgen: the lead's preview and its rate-limit hold) hears how
a prototype goes through jobs of kinds this module owns, enqueued in the
transaction of the change, whose handlers it registers: CHECKED_KIND while a
check finds it unfinished, FINISHED_KIND once it ends. prototypes never
imports that app.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

import structlog
from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.db.models import F
from django.template.loader import render_to_string
from django.utils import timezone

import jobs
from foundation.db import update_many
from integrations.v0 import client as v0
from jobs import PermanentError, SkipJob, TransientError
from prototypes import event_log, selectors
from prototypes.models import Prototype, PrototypeEvent

logger = structlog.get_logger(__name__)

CHECK_KIND = "prototypes.check"
READY_NOTE_KIND = "prototypes.ready_note"
READY_ALERT_KIND = "prototypes.ready_alert"
READY_EMAIL_KIND = "prototypes.ready_email"
FAILED_ALERT_KIND = "prototypes.failed_alert"
# A check found the prototype unfinished. Payload: lead_id, prototype_id.
CHECKED_KIND = "prototypes.checked"
# The prototype ended: completed, failed or cancelled. Payload: lead_id, prototype_id, completed, preview_url.
FINISHED_KIND = "prototypes.finished"
METADATA_KEY = "leadKey"  # our metadata on the V0 chat: finds the chat a lost answer created
CONTINUE_MESSAGE = "Continue from where you stopped and finish the prototype."
START_LOCK_SECONDS = 60
# A generation V0 ended without a usable result is continued, and a stale one recovered, this many times; then
# the prototype fails and the visitor is told.
MAX_CONTINUE_ATTEMPTS = 3
MAX_RECOVERY_ATTEMPTS = 3
STARTING = "Starting your prototype"
CHAT_CREATED = "Your prototype is being generated"
NOT_CONFIGURED = "not configured: V0_API_KEY is empty"

VISITOR_FAILED = "We could not finish your prototype this time. Our team has been told and will be in touch."
VISITOR_UNAVAILABLE = "Prototype generation is not available right now. Our team will be in touch."
VISITOR_CANCELLED = "This prototype was stopped by our team. We will be in touch."


# --- the start ----------------------------------------------------------------------------------
def prototype_start(*, lead_id: int | None = None, prototype_id: int | None = None) -> Prototype:
    """Start the generation unless it has started: one V0 chat per lead, ever.

    queued → generating under a row lock, then the V0 chat is created (or, if
    this is not the first start, the one an earlier, lost answer created is
    found by our metadata; a first start has had no answer to lose). A transient
    V0 failure leaves it generating without a chat for the next check to
    start; a permanent one, or V0 not configured, fails the prototype.
    """
    with transaction.atomic():
        query = Prototype.objects.select_for_update().select_related("lead")
        prototype = query.get(lead_id=lead_id) if lead_id is not None else query.get(pk=prototype_id)
        if prototype.state != Prototype.State.QUEUED:
            return prototype
        now, first = timezone.now(), prototype.started_at is None
        state_set(prototype, Prototype.State.GENERATING, started_at=now, generating_since=now)
        event_log.progress(prototype, STARTING, step=0)
    _create_chat(prototype, first=first)
    prototype.refresh_from_db()
    return prototype


def _create_chat(prototype: Prototype, *, first: bool = False) -> None:
    client = v0.client_from_settings()
    if client is None:
        fail_unconfigured(prototype.pk)
        return
    if not cache.add(start_lock(prototype.pk), 1, START_LOCK_SECONDS):
        return  # another process is creating it right now
    try:
        request = chat_request(prototype.pk, prototype.lead, first=first)
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
        cache.delete(start_lock(prototype.pk))
    with transaction.atomic():
        Prototype.objects.filter(pk=prototype.pk).update(chat_id=chat_id, message_id=message_id, last_error="")
        prototype.chat_id, prototype.message_id = chat_id, message_id
        event_log.progress(prototype, CHAT_CREATED, step=0)
    logger.info("prototype_chat_created", prototype_id=prototype.pk)


def start_lock(prototype_id: int) -> str:
    """The cache key held while a start creates the prototype's V0 chat."""
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


def chat_request(prototype_id: int, lead, *, first: bool) -> ChatRequest:
    prompt = render_to_string("prototypes/prompt.txt", {"lead": lead, "steps": lead.steps}).strip()
    return ChatRequest(prototype_id=prototype_id, first=first, prompt=prompt, lead_key=str(lead.public_id))


def prototype_start_failed(*, prototype_id: int, error: TransientError | PermanentError) -> None:
    """A start's V0 call failed. Transient: it stays generating without a chat, for the next check to start
    (looking first for the chat a lost answer created); permanent: the prototype fails."""
    if isinstance(error, TransientError):
        logger.warning("prototype_start_deferred", prototype_id=prototype_id, error=str(error))
        Prototype.objects.filter(pk=prototype_id).update(last_error=f"transient: {error}"[:2000])
    else:
        fail(prototype_id, error=f"permanent: {error}", visitor_message=VISITOR_FAILED)


# --- the check ----------------------------------------------------------------------------------
def prototype_check(*, prototype_id: int, check: int | None = None, now: datetime | None = None) -> Prototype:
    """One check by the processor; the rules of the flow, in order:

    no chat yet → start it; the latest message final and waiting on a plan →
    approve it; final with a preview → completed; final without a usable
    result (length, error…) → continue, at most MAX_CONTINUE_ATTEMPTS,
    then failed; still generating (or final, no preview yet) longer than
    PROTOTYPES_STALE_SECONDS → stale: stop and continue, at most
    MAX_RECOVERY_ATTEMPTS, then failed. Otherwise check again later.
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
        fail_unconfigured(prototype.pk)
        raise SkipJob(NOT_CONFIGURED)
    if prototype.state == Prototype.State.QUEUED:
        prototype = prototype_start(prototype_id=prototype.pk)
    elif not prototype.chat_id:
        _create_chat(prototype)
    else:
        _act_on_generation(prototype, client, now)
    prototype = Prototype.objects.select_related("lead").get(pk=prototype.pk)
    if not prototype.is_terminal:
        with transaction.atomic():
            Prototype.objects.filter(pk=prototype.pk).update(last_checked_at=now)
            jobs.enqueue(  # the lead's hold lives on
                CHECKED_KIND,
                {"lead_id": prototype.lead_id, "prototype_id": prototype.pk},
                key=f"{CHECKED_KIND}:{prototype.pk}:{prototype.checks}",
            )
            if check is None or check == prototype.checks:
                schedule_check(prototype, delay=settings.PROTOTYPES_CHECK_SECONDS)
    return prototype


def _act_on_generation(prototype: Prototype, client: v0.V0Client, now: datetime) -> None:
    generation = client.latest_generation(prototype.chat_id)
    if generation.finished:
        if generation.awaiting_plan:
            _state_set_now(prototype, Prototype.State.AWAITING_PLAN)
            message_id = client.approve_plan(prototype.chat_id)
            _resume(prototype, message_id, "Plan approved: building your prototype", now=now)
            return
        if generation.finish_reason == "stop":
            if preview := client.preview(prototype.chat_id):
                _complete(prototype.pk, preview_url=preview.url)
                return
        elif generation.finish_reason == "content-filter":
            fail(prototype.pk, error="V0 refused the request (content filter)", visitor_message=VISITOR_FAILED)
            return
        else:
            _state_set_now(prototype, Prototype.State.INTERRUPTED)
            if prototype.continue_attempts >= MAX_CONTINUE_ATTEMPTS:
                fail(
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
        _state_set_now(prototype, Prototype.State.STALE)
        if prototype.recovery_attempts >= MAX_RECOVERY_ATTEMPTS:
            fail(
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
        _state_set_now(prototype, Prototype.State.GENERATING)


def _resume(prototype, message_id: str, status: str, *, now, continued=False, recovered=False) -> None:
    with transaction.atomic():
        locked = Prototype.objects.select_for_update().get(pk=prototype.pk)
        if locked.is_terminal:
            return
        state_set(
            locked,
            Prototype.State.GENERATING,
            generating_since=now,
            message_id=message_id,
            continue_attempts=locked.continue_attempts + continued,
            recovery_attempts=locked.recovery_attempts + recovered,
        )
        event_log.progress(locked, status)


# --- the end ------------------------------------------------------------------------------------
def _complete(prototype_id: int, *, preview_url: str) -> None:
    """Completed, once: the lead told (FINISHED_KIND: its preview, its quota consumed), sales and the visitor
    too."""
    with transaction.atomic():
        prototype = Prototype.objects.select_for_update().get(pk=prototype_id)
        if prototype.is_terminal:
            return
        prototype.preview_url = preview_url
        state_set(prototype, Prototype.State.COMPLETED, finished_at=timezone.now())
        event = event_log.event_add(
            prototype_id=prototype.pk,
            kind=PrototypeEvent.Kind.COMPLETE,
            data={"state": prototype.state, "previewUrl": preview_url, "title": prototype.title},
        )
        prototype.events = event.number
        jobs.enqueue_many([_finished_job(prototype), *_ready_jobs(prototype)])
    logger.info("prototype_completed", prototype_id=prototype_id)


def prototypes_complete(*, previews: list[tuple[int, str]]) -> list[PrototypeEvent]:
    """Prototypes whose V0 generation a caller found finished, stopped and with a preview, `(prototype_id,
    preview url)` each: completed as _complete completes one (the progress stream's relays, once V0's
    stream of each ends, having read V0 on the event loop: a thousand end within seconds). One transaction
    and a statement per kind of write for all of them. Returns the logged events: the caller announces
    them."""
    urls = dict(previews)
    now = timezone.now()
    with transaction.atomic():
        query = Prototype.objects.select_for_update().filter(pk__in=urls)
        prototypes = list(query.exclude(state__in=Prototype.TERMINAL).order_by("pk"))
        logged = []
        for prototype in prototypes:
            prototype.preview_url = urls[prototype.pk]
            prototype.state, prototype.state_changed_at, prototype.finished_at = Prototype.State.COMPLETED, now, now
            prototype.events += 1  # the row is locked: numbered as event_log.event_add numbers it
            data = {"state": prototype.state, "previewUrl": prototype.preview_url, "title": prototype.title}
            logged.append(
                PrototypeEvent(
                    prototype=prototype, number=prototype.events, kind=PrototypeEvent.Kind.COMPLETE, data=data,
                    created_at=now,
                )
            )  # fmt: skip
        update_many(prototypes, ["preview_url", "state", "state_changed_at", "finished_at", "events"])
        PrototypeEvent.objects.bulk_create(logged)
        jobs.enqueue_many([spec for p in prototypes for spec in (_finished_job(p), *_ready_jobs(p))])
    logger.info("prototypes_completed", prototype_ids=[prototype.pk for prototype in prototypes])
    return logged


def fail(prototype_id: int, *, error: str, visitor_message: str, alert: bool = True) -> None:
    """Failed, once: the lead told (FINISHED_KIND: its hold dropped without consuming quota), sales alerted,
    the visitor told."""
    with transaction.atomic():
        prototype = Prototype.objects.select_for_update().get(pk=prototype_id)
        if prototype.is_terminal:
            return
        prototype.last_error = error[:2000]
        state_set(prototype, Prototype.State.FAILED, finished_at=timezone.now())
        event = event_log.event_add(
            prototype_id=prototype.pk,
            kind=PrototypeEvent.Kind.ERROR,
            data={"state": prototype.state, "message": visitor_message},
        )
        prototype.events = event.number
        alerts = [_job(FAILED_ALERT_KIND, prototype, suffix=str(event.number))] if alert else []
        jobs.enqueue_many([_finished_job(prototype), *alerts])
    logger.warning("prototype_failed", prototype_id=prototype_id, error=error[:200])


def fail_unconfigured(prototype_id: int) -> None:
    """V0 is off: the visitor is told and the hold dropped at once; sales need no alert for it."""
    fail(prototype_id, error=NOT_CONFIGURED, visitor_message=VISITOR_UNAVAILABLE, alert=False)


def _finished_job(prototype: Prototype) -> jobs.JobSpec:
    """FINISHED_KIND for this end of the prototype (a retried prototype can end again: keyed by its last
    event)."""
    completed = prototype.state == Prototype.State.COMPLETED
    return jobs.JobSpec(
        FINISHED_KIND,
        {
            "lead_id": prototype.lead_id,
            "prototype_id": prototype.pk,
            "completed": completed,
            "preview_url": prototype.preview_url if completed else "",
        },
        key=f"{FINISHED_KIND}:{prototype.pk}:{prototype.events}",
    )


def _ready_jobs(prototype: Prototype) -> list[jobs.JobSpec]:
    return [_job(kind, prototype) for kind in (READY_ALERT_KIND, READY_NOTE_KIND, READY_EMAIL_KIND)]


def _job(kind: str, prototype: Prototype, *, suffix: str = "") -> jobs.JobSpec:
    key = f"{kind}:{prototype.pk}" + (f":{suffix}" if suffix else "")
    return jobs.JobSpec(kind, {"prototype_id": prototype.pk}, key=key)


# --- state and schedule ---------------------------------------------------------------------------
def state_set(prototype: Prototype, state: str, **fields) -> None:
    """Save a state change (and `fields`) on a row the caller holds."""
    if prototype.state != state:
        prototype.state = state
        prototype.state_changed_at = timezone.now()
    for name, value in fields.items():
        setattr(prototype, name, value)
    prototype.save(update_fields=["state", "state_changed_at", "last_error", "preview_url", *fields])


def _state_set_now(prototype: Prototype, state: str) -> None:
    """Record what the processor found before it acts, so a failed action leaves the truth behind."""
    if prototype.state == state:
        return
    with transaction.atomic():
        locked = Prototype.objects.select_for_update().get(pk=prototype.pk)
        if locked.is_terminal:
            return
        state_set(locked, state)
        prototype.state = state


def schedule_check(prototype: Prototype, *, delay: float) -> None:
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
