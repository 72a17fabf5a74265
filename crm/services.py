"""Writes of the CRM: the LeadCreated processor, task actions, LeadCreated replays."""

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
from leadgen.models import Lead

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


def _contact_upsert(lead: Lead, arrived_at) -> int:
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


def _outreach_task_insert(lead: Lead, contact_id: int, arrived_at) -> bool:
    """One high-priority outreach task per lead, and none while the contact has one pending."""
    store = lead.store
    reason = f"New {lead.lead_type or 'lead'} from {lead.first_name or 'unknown'} {lead.last_name or ''}".strip()
    task = Task(
        contact_id=contact_id,
        store_id=store.pk,
        franchise=lead.franchise,
        account_id=lead.account_id,
        task_type=Task.TaskType.LEAD_OUTREACH,
        type_category=Task.TaskType.LEAD_OUTREACH,
        source_type=Task.SourceType.LEAD,
        source_lead_id=lead.pk,
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


def _lead_created_event_append(lead: Lead, contact_id: int, arrived_at) -> None:
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
        lead = (
            Lead.objects.select_related("store")
            .only(*LEAD_FIELDS, *(f"store__{name}" for name in STORE_FIELDS))
            .get(pk=lead_id)
        )
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


def tasks_mark_done(*, task_ids, actor: str) -> int:
    """Close pending tasks; done or cancelled ones are left as they are."""
    now = timezone.now()
    with transaction.atomic():
        count = Task.objects.filter(pk__in=task_ids, status=Task.Status.PENDING).update(
            status=Task.Status.DONE, completed_at=now, completed_by=actor, updated_at=now
        )
    logger.info("tasks_marked_done", count=count, actor=actor)
    return count


def lead_created_replay(*, since, actor: str) -> int:
    """Emit LeadCreated again for every complete email lead received since `since`.

    Each replay run gets its own job keys, so leads whose first event was
    processed long ago run again; the processor then fixes what is missing and
    changes nothing else. One transaction per batch of leads.
    """
    replay = f"{timezone.now():%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:6]}"
    leads = (
        Lead.objects.filter(channel=Lead.Channel.EMAIL, parse_state=Lead.ParseState.PARSED, received_at__gte=since)
        .exclude(phone="")
        .exclude(store=None)
        .only("phone", "franchise", "account_id", "store")
        .order_by("pk")
    )
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
