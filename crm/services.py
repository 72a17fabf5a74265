"""Writes of the CRM: the LeadCreated processor, task actions, LeadCreated replays."""

import uuid
from dataclasses import dataclass

import structlog
from django.conf import settings
from django.db import transaction
from django.db.models import Case, F, Q, Value, When
from django.db.models.functions import Coalesce, Greatest
from django.utils import timezone

from crm.events import lead_created_emit, lead_created_missing_fields
from crm.models import Contact, Task, TimelineEvent
from crm.sla import outreach_due_at
from leadgen.models import Lead

logger = structlog.get_logger(__name__)

LEAD_CREATED_EVENT = "lead.created"
REPLAY_BATCH = 500


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


def _contact_upsert(lead: Lead, arrived_at) -> Contact:
    """Insert the contact, or fill in what the existing one lacks; lifecycle and status are never touched.

    Last activity only moves forward, so an older lead processed late never
    moves it back. The update runs only when it changes something, so a replay
    leaves the row (updated_at included) exactly as it was.
    """
    identity = {"phone": lead.phone, "store_id": lead.store_id}
    Contact.objects.bulk_create(
        [
            Contact(
                **identity,
                franchise=lead.franchise,
                account_id=lead.account_id,
                lifecycle_stage=Contact.LifecycleStage.LEAD,
                lead_status=Contact.LeadStatus.NEW,
                first_name=lead.first_name,
                last_name=lead.last_name,
                last_activity_at=arrived_at,
            )
        ],
        ignore_conflicts=True,
    )
    changes = Q(last_activity_at__isnull=True) | Q(last_activity_at__lt=arrived_at)
    if lead.first_name:
        changes |= Q(first_name="")
    if lead.last_name:
        changes |= Q(last_name="")
    Contact.objects.filter(**identity).filter(changes).update(
        last_activity_at=Greatest(Coalesce(F("last_activity_at"), Value(arrived_at)), Value(arrived_at)),
        first_name=Case(When(first_name="", then=Value(lead.first_name)), default=F("first_name")),
        last_name=Case(When(last_name="", then=Value(lead.last_name)), default=F("last_name")),
        updated_at=timezone.now(),
    )
    return Contact.objects.get(**identity)


def _outreach_task_insert(lead: Lead, contact: Contact, arrived_at) -> bool:
    """One high-priority outreach task per lead, and none while the contact has one pending."""
    store = lead.store
    reason = f"New {lead.lead_type or 'lead'} from {lead.first_name or 'unknown'} {lead.last_name or ''}".strip()
    task = Task(
        id=uuid.uuid4(),
        contact=contact,
        store=store,
        franchise=lead.franchise,
        account_id=lead.account_id,
        task_type=Task.TaskType.LEAD_OUTREACH,
        type_category=Task.TaskType.LEAD_OUTREACH,
        source_type=Task.SourceType.LEAD,
        source_lead=lead,
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
    # ON CONFLICT DO NOTHING covers both unique constraints: per source lead, and one pending per contact.
    Task.objects.bulk_create([task], ignore_conflicts=True)
    return Task.objects.filter(pk=task.pk).exists()


def _lead_created_event_append(lead: Lead, contact: Contact, arrived_at) -> None:
    TimelineEvent.objects.bulk_create(
        [
            TimelineEvent(
                contact=contact,
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
        ],
        ignore_conflicts=True,
    )


def lead_created_process(*, lead_id: int) -> LeadProcessed:
    """The LeadCreated processor: contact, outreach task and timeline event, in one transaction.

    Every write is an insert-if-absent or a forward-only update, so processing
    the same lead again, at the same time or later, changes nothing.
    """
    with transaction.atomic():
        lead = Lead.objects.select_related("store").get(pk=lead_id)
        missing = lead_created_missing_fields(lead)
        if missing:
            raise LeadIncomplete(f"lead {lead_id} lacks {', '.join(missing)}")
        # The time the lead arrived, not now: a lead processed late must not look fresh.
        arrived_at = lead.received_at or lead.created_at
        contact = _contact_upsert(lead, arrived_at)
        task_created = _outreach_task_insert(lead, contact, arrived_at)
        _lead_created_event_append(lead, contact, arrived_at)
    logger.info("lead_processed", lead_id=lead_id, contact_id=contact.pk, task_created=task_created)
    return LeadProcessed(contact_id=contact.pk, task_created=task_created)


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
