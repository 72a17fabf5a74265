"""Writes of the CRM: the LeadCreated processor, task actions (each on the contact's timeline), LeadCreated replays."""

import uuid
from dataclasses import dataclass

import structlog
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from config.db import insert_on_conflict
from crm.events import lead_created_emit, lead_created_missing_fields
from crm.models import Contact, Task, TimelineEvent
from crm.sla import outreach_due_at
from leadgen import selectors as lead_selectors

logger = structlog.get_logger(__name__)

LEAD_CREATED_EVENT = "lead.created"
REPLAY_BATCH = 500
# What the processor reads of a lead and its store (not the raw body).
LEAD_FIELDS = ("phone", "first_name", "last_name", "lead_type", "franchise", "account_id", "received_at",
               "created_at", "store")  # fmt: skip
STORE_FIELDS = ("timezone", "quiet_hours_start", "quiet_hours_end")


class LeadIncomplete(Exception):
    """The lead lacks what a contact needs (phone and store) or the audit fields."""


@dataclass(frozen=True)
class LeadProcessed:
    contact_id: int
    task_created: bool  # False: the lead's task exists already, or the contact has one pending


def _suggested_actions() -> list[dict]:
    minutes = settings.LEAD_OUTREACH_SLA_MINUTES
    return [
        {
            "action": "call",
            "priority": "high",
            "title": "Call the new lead back now",
            "detail": f"Leads called within {minutes} minutes of arriving convert best: call before the due time.",
        }
    ]


def _contact_upsert(lead, arrived_at) -> int:
    """Insert the contact, or fill in what the existing one lacks; lifecycle and status are never touched.

    Last activity only moves forward, so an older lead processed late never
    moves it back. The update runs only when it changes something, so a replay
    leaves the row (updated_at included) exactly as it was. One statement.
    """
    table = connection.ops.quote_name(Contact._meta.db_table)
    greatest = "GREATEST" if connection.vendor == "postgresql" else "MAX"  # SQLite's two-argument MAX
    changes = (
        f"{table}.last_activity_at IS NULL OR {table}.last_activity_at < excluded.last_activity_at"
        f" OR ({table}.first_name = '' AND excluded.first_name <> '')"
        f" OR ({table}.last_name = '' AND excluded.last_name <> '')"
    )
    on_conflict = (
        "ON CONFLICT (phone, store_id) DO UPDATE SET"
        f" first_name = CASE WHEN {table}.first_name = '' THEN excluded.first_name ELSE {table}.first_name END,"
        f" last_name = CASE WHEN {table}.last_name = '' THEN excluded.last_name ELSE {table}.last_name END,"
        f" last_activity_at = {greatest}(COALESCE({table}.last_activity_at, excluded.last_activity_at),"
        " excluded.last_activity_at),"
        f" updated_at = excluded.updated_at WHERE {changes}"
    )
    contact = Contact(
        phone=lead.phone, store_id=lead.store_id, franchise=lead.franchise, account_id=lead.account_id,
        lifecycle_stage=Contact.LifecycleStage.LEAD, lead_status=Contact.LeadStatus.NEW,
        first_name=lead.first_name, last_name=lead.last_name, last_activity_at=arrived_at,
    )  # fmt: skip
    row = insert_on_conflict(contact, on_conflict=on_conflict, returning="id")
    if row is None:  # the contact exists and this lead changes nothing in it
        return Contact.objects.filter(phone=lead.phone, store_id=lead.store_id).values_list("pk", flat=True).get()
    return row[0]


def _outreach_task_insert(lead, contact_id: int, arrived_at) -> bool:
    """One high-priority outreach task per lead, and none while the contact has one pending."""
    store = lead.store
    reason = f"New {lead.lead_type or 'lead'} from {lead.full_name or 'unknown'}"
    task = Task(
        contact_id=contact_id,
        store_id=store.pk,
        franchise=lead.franchise,
        account_id=lead.account_id,
        task_type=Task.TaskType.LEAD_OUTREACH,
        type_category=Task.TaskType.LEAD_OUTREACH,
        source_type=Task.SourceType.LEAD,
        source_lead_id=lead.pk,
        arrived_at=arrived_at,
        lead_recorded_at=lead.created_at,
        status=Task.Status.PENDING,
        priority=Task.Priority.HIGH,
        action_needed=True,
        action_needed_reason=reason[: Task._meta.get_field("action_needed_reason").max_length],
        suggested_actions=_suggested_actions(),
        due_at=outreach_due_at(
            arrived_at=arrived_at,
            sla_minutes=settings.LEAD_OUTREACH_SLA_MINUTES,
            zone=store.zone,
            start=store.quiet_hours_start,
            end=store.quiet_hours_end,
        ),
    )
    # DO NOTHING covers both unique constraints: per source lead, and one pending task per contact.
    return insert_on_conflict(task, on_conflict="ON CONFLICT DO NOTHING", returning="id") is not None


def _lead_created_event_append(lead, contact_id: int, arrived_at) -> None:
    event = TimelineEvent(
        contact_id=contact_id,
        store_id=lead.store_id,
        franchise=lead.franchise,
        account_id=lead.account_id,
        event_type=LEAD_CREATED_EVENT,
        event_category="lead",
        entity_type="lead",
        entity_id=str(lead.pk),
        occurred_at=arrived_at,
        actor_type="lead_webhook",
        new_value={"leadType": lead.lead_type, "firstName": lead.first_name, "lastName": lead.last_name},
        idempotency_key=f"{LEAD_CREATED_EVENT}:{lead.pk}",
    )
    insert_on_conflict(event, on_conflict="ON CONFLICT DO NOTHING")


def lead_created_process(*, lead_id: int) -> LeadProcessed:
    """The LeadCreated processor: contact, outreach task and timeline event, in one transaction.

    Every write is an insert-if-absent or a forward-only update, so processing
    the same lead again, at the same time or later, changes nothing.
    """
    with transaction.atomic():
        lead = lead_selectors.lead_for_processing(lead_id=lead_id, fields=LEAD_FIELDS, store_fields=STORE_FIELDS)
        missing = lead_created_missing_fields(lead)
        if missing:
            raise LeadIncomplete(f"lead {lead_id} lacks {', '.join(missing)}")
        # The time the lead arrived, not now: a lead processed late must not look fresh.
        arrived_at = lead.received_at or lead.created_at
        contact_id = _contact_upsert(lead, arrived_at)
        task_created = _outreach_task_insert(lead, contact_id, arrived_at)
        _lead_created_event_append(lead, contact_id, arrived_at)
    logger.info("lead_processed", lead_id=lead_id, contact_id=contact_id, task_created=task_created)
    return LeadProcessed(contact_id=contact_id, task_created=task_created)


class TaskChanged(Exception):
    """The task is no longer pending, or changed after the page that acts on it was shown."""


# Timeline event types of what staff do with a task; keys make a repeated request record nothing twice.
TASK_CONTACTED_EVENT = "task.contacted"
TASK_DONE_EVENT = "task.done"
TASK_SNOOZED_EVENT = "task.snoozed"


def _task_event(task: Task, *, event_type: str, key: str, actor: str, now, **values) -> TimelineEvent:
    return TimelineEvent(
        contact_id=task.contact_id, store_id=task.store_id, franchise=task.franchise, account_id=task.account_id,
        event_type=event_type, event_category="task", entity_type="task", entity_id=str(task.pk), occurred_at=now,
        actor_type="staff", new_value={"by": actor, **values}, idempotency_key=key,
    )  # fmt: skip


def _pending_task_locked(task_id, seen_updated_at) -> Task:
    task = Task.objects.select_for_update().filter(pk=task_id, status=Task.Status.PENDING).first()
    if task is None or (seen_updated_at is not None and task.updated_at != seen_updated_at):
        raise TaskChanged(f"task {task_id} is no longer as shown")
    return task


def _task_close(task: Task, *, event_type: str, actor: str, reason: str, now) -> None:
    task.status, task.completed_at, task.completed_by = Task.Status.DONE, now, actor
    task.save(update_fields=["status", "completed_at", "completed_by", "updated_at"])
    _task_event(task, event_type=event_type, key=f"{event_type}:{task.pk}", actor=actor, now=now, reason=reason).save()


def task_mark_done(*, task_id, actor: str, reason: str = "", seen_updated_at=None) -> Task:
    """Close a pending task; recorded on the contact's timeline. TaskChanged if it is not pending (any more)."""
    with transaction.atomic():
        task = _pending_task_locked(task_id, seen_updated_at)
        _task_close(task, event_type=TASK_DONE_EVENT, actor=actor, reason=reason, now=timezone.now())
    logger.info("task_marked_done", task_id=str(task.pk), actor=actor)
    return task


def task_mark_contacted(*, task_id, actor: str, reason: str = "", seen_updated_at=None) -> Task:
    """The lead was reached: the task closes and a new or attempted contact becomes connected."""
    with transaction.atomic():
        task = _pending_task_locked(task_id, seen_updated_at)
        now = timezone.now()
        _task_close(task, event_type=TASK_CONTACTED_EVENT, actor=actor, reason=reason, now=now)
        Contact.objects.filter(
            pk=task.contact_id, lead_status__in=[Contact.LeadStatus.NEW, Contact.LeadStatus.ATTEMPTED]
        ).update(lead_status=Contact.LeadStatus.CONNECTED, last_activity_at=now, updated_at=now)
    logger.info("task_marked_contacted", task_id=str(task.pk), actor=actor)
    return task


def task_snooze(*, task_id, actor: str, until, reason: str, seen_updated_at=None) -> Task:
    """Move a pending task's due time to `until` (later than now) for `reason`; recorded on the timeline."""
    if not reason.strip():
        raise ValueError("a snooze needs a reason")
    now = timezone.now()
    if until <= now:
        raise ValueError("a snooze must end in the future")
    with transaction.atomic():
        task = _pending_task_locked(task_id, seen_updated_at)
        previous = task.due_at
        task.due_at = until
        task.save(update_fields=["due_at", "updated_at"])
        _task_event(
            task, event_type=TASK_SNOOZED_EVENT, key=f"{TASK_SNOOZED_EVENT}:{task.pk}:{previous.isoformat()}",
            actor=actor, now=now, reason=reason.strip(), due_before=previous.isoformat(), due_after=until.isoformat(),
        ).save()  # fmt: skip
    logger.info("task_snoozed", task_id=str(task.pk), actor=actor)
    return task


def task_save(*, task: Task, actor: str) -> Task:
    """Save a task staff created or edited: the contact decides the store, the category is also the type,
    and a task set done records when and by whom."""
    contact = task.contact
    task.store, task.franchise, task.account_id = contact.store, contact.franchise, contact.account_id
    task.task_type = task.type_category
    if task.status == Task.Status.DONE and task.completed_at is None:
        task.completed_at, task.completed_by = timezone.now(), actor
    task.save()
    return task


def tasks_mark_done(*, task_ids, actor: str) -> int:
    """Close the pending ones of `task_ids` (done or cancelled ones are left as they are), each on its timeline."""
    now = timezone.now()
    with transaction.atomic():
        tasks = list(Task.objects.select_for_update().filter(pk__in=task_ids, status=Task.Status.PENDING))
        Task.objects.filter(pk__in=[task.pk for task in tasks]).update(
            status=Task.Status.DONE, completed_at=now, completed_by=actor, updated_at=now
        )
        TimelineEvent.objects.bulk_create(
            [
                _task_event(task, event_type=TASK_DONE_EVENT, key=f"{TASK_DONE_EVENT}:{task.pk}", actor=actor,
                            now=now, reason="")
                for task in tasks
            ],  # fmt: skip
            ignore_conflicts=True,
        )
    logger.info("tasks_marked_done", count=len(tasks), actor=actor)
    return len(tasks)


def lead_created_replay(*, since, actor: str) -> int:
    """Emit LeadCreated again for every complete email lead received since `since`.

    Each replay run gets its own job keys, so leads whose first event was
    processed long ago run again; the processor then fixes what is missing and
    changes nothing else. One transaction per batch of leads.
    """
    replay = f"{timezone.now():%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:6]}"
    leads = lead_selectors.email_leads_complete_since(since=since).only("phone", "franchise", "account_id", "store")
    emitted, last_pk = 0, 0
    while True:
        batch = list(leads.filter(pk__gt=last_pk)[:REPLAY_BATCH])
        if not batch:
            break
        with transaction.atomic():
            emitted += sum(lead_created_emit(lead=lead, replay=replay) is not None for lead in batch)
        last_pk = batch[-1].pk
    logger.info("lead_created_replayed", count=emitted, actor=actor, replay=replay)
    return emitted
