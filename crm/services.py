"""Writes of the CRM: the lead processor (every channel's leads join their contact, qualified ones open an
outreach task), touchpoints on a contact's timeline, task actions, LeadCreated replays."""

import uuid
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

import structlog
from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from chat import selectors as chat_selectors
from crm.assignment import task_owners_pick
from crm.identity import Person, contact_resolve, contacts_resolve, email_key, phone_key
from crm.intake import lead_created_emit, lead_created_missing_fields
from crm.models import Contact, Task, TimelineEvent
from crm.sla import outreach_due_at
from foundation.db import insert_many_on_conflict, insert_on_conflict, update_many
from leadgen import selectors as lead_selectors

logger = structlog.get_logger(__name__)

LEAD_CREATED_EVENT = "lead.created"
CHAT_LINKED_EVENT = "chat.linked"
DOCS_SIGNED_IN_EVENT = "docs.signed_in"
REPLAY_BATCH = 500
# What the processor reads of a lead and its store (not the raw body, the message or the answers).
LEAD_FIELDS = (
    "channel", "status", "is_test", "email", "phone", "first_name", "last_name", "company", "service_type",
    "lead_type", "franchise", "account_id", "received_at", "created_at", "store",
)  # fmt: skip
STORE_FIELDS = ("franchise", "account_id", "timezone", "quiet_hours_start", "quiet_hours_end")
QUALIFIED_STATUS = "lead"  # leadgen's Lead.Status.LEAD: a lead sales works, not spam or a vendor
EMAIL_CHANNEL = "email"  # leadgen's Lead.Channel.EMAIL
# Who set a lead.created off, by channel; the platforms' leads (sources/) are "lead_source".
LEAD_ACTORS = {EMAIL_CHANNEL: "lead_webhook", "web_form": "visitor"}


class LeadIncomplete(Exception):
    """The lead lacks what a contact needs: a phone or an email."""


@dataclass(frozen=True)
class LeadProcessed:
    contact_id: int | None  # None: the lead is not one sales works (spam, a vendor, a platform's test)
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


def _lead_person(lead) -> Person:
    store = lead.store
    return Person(
        email=email_key(lead.email), phone=phone_key(lead.phone), first_name=lead.first_name,
        last_name=lead.last_name, company=lead.company,
        franchise=lead.franchise or (store.franchise if store else ""),
        account_id=lead.account_id or (store.account_id if store else ""),
    )  # fmt: skip


def _outreach_due_at(store, arrived_at: datetime) -> datetime:
    """The SLA after arrival, past the quiet hours of the store, or of the shared pool for a lead of no store."""
    if store is None:
        zone = ZoneInfo(settings.SHARED_POOL_TIMEZONE)
        start, end = settings.SHARED_POOL_QUIET_HOURS_START, settings.SHARED_POOL_QUIET_HOURS_END
    else:
        zone, start, end = store.zone, store.quiet_hours_start, store.quiet_hours_end
    return outreach_due_at(
        arrived_at=arrived_at, sla_minutes=settings.LEAD_OUTREACH_SLA_MINUTES, zone=zone, start=start, end=end
    )


def _outreach_task(lead, person: Person, contact_id: int, arrived_at) -> Task:
    reason = f"New {lead.lead_type or lead.get_service_type_display() or 'lead'} from {lead.full_name or 'unknown'}"
    return Task(
        contact_id=contact_id,
        store_id=lead.store_id,
        franchise=person.franchise,
        account_id=person.account_id,
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
        due_at=_outreach_due_at(lead.store, arrived_at),
    )


def _outreach_tasks_insert(arrivals: list[tuple], contact_ids: dict[int, int]) -> set[int]:
    """One high-priority outreach task per lead, and none while the contact has one pending (the earlier lead's
    wins); owners are picked (by rule, else round-robin) only for the tasks written, in the leads' order, so a
    lead that adds no task takes nobody's turn. The ids of the leads whose task was written."""
    tasks = [_outreach_task(lead, person, contact_ids[lead.pk], arrived) for lead, person, arrived in arrivals]
    # DO NOTHING covers both unique constraints: per source lead, and one pending task per contact.
    written = {lead_id for (lead_id,) in insert_many_on_conflict(
        tasks, on_conflict="ON CONFLICT DO NOTHING", returning="source_lead_id"
    )}  # fmt: skip
    new = [(lead, task) for (lead, _, _), task in zip(arrivals, tasks, strict=True) if lead.pk in written]
    owners = task_owners_pick([(lead.store_id, lead.service_type, lead.channel) for lead, _ in new])
    for (_, task), owner_id in zip(new, owners, strict=True):
        task.assigned_to_id = owner_id
    update_many([task for task in tasks if task.assigned_to_id is not None], ["assigned_to"])
    return written


def _event(*, contact_id: int, store_id, person: Person, event_type: str, category: str, entity_type: str,
           entity_id, occurred_at, actor_type: str, new_value: dict, key: str) -> TimelineEvent:  # fmt: skip
    return TimelineEvent(
        contact_id=contact_id, store_id=store_id, franchise=person.franchise, account_id=person.account_id,
        event_type=event_type, event_category=category, entity_type=entity_type, entity_id=str(entity_id),
        occurred_at=occurred_at, actor_type=actor_type, new_value=new_value, idempotency_key=key,
    )  # fmt: skip


def _lead_events(lead, person: Person, contact_id: int, arrived_at, sessions) -> list[TimelineEvent]:
    """The lead's arrival (its channel, type and names) and the chats that produced it (their ids). The page
    reads the answers and the transcripts from their own rows: no copy of them is kept here."""
    values = {"channel": lead.channel, "leadType": lead.lead_type, "firstName": lead.first_name,
              "lastName": lead.last_name}  # fmt: skip
    if lead.service_type:
        values["serviceType"] = lead.service_type
    common = {"contact_id": contact_id, "store_id": lead.store_id, "person": person}
    events = [
        _event(
            **common, event_type=LEAD_CREATED_EVENT, category="lead", entity_type="lead", entity_id=lead.pk,
            occurred_at=arrived_at, actor_type=LEAD_ACTORS.get(lead.channel, "lead_source"), new_value=values,
            key=f"{LEAD_CREATED_EVENT}:{lead.pk}",
        )
    ]  # fmt: skip
    if lead.channel != EMAIL_CHANNEL:  # only the web form's leads come from a chat
        events += [
            _event(
                **common, event_type=CHAT_LINKED_EVENT, category="chat", entity_type="chat_session",
                entity_id=session.pk, occurred_at=session.first_seen_at, actor_type="visitor",
                new_value={"sessionId": session.session_id, "leadId": lead.pk},
                key=f"{CHAT_LINKED_EVENT}:{session.pk}",
            )
            for session in sessions
        ]  # fmt: skip
    return events


def _leads_contact_ids(lead_ids: list[int]) -> dict[int, int]:
    """The contacts leads joined when they were processed before: they stay there (a merge moves them with their
    events), so a replay never resolves them again into a contact since merged away."""
    keys = {f"{LEAD_CREATED_EVENT}:{lead_id}": lead_id for lead_id in lead_ids}
    joined = TimelineEvent.objects.filter(idempotency_key__in=keys).values_list("idempotency_key", "contact_id")
    return {keys[key]: contact_id for key, contact_id in joined}


def lead_created_process(*, lead_id: int) -> LeadProcessed:
    """The lead processor, for a lead of any channel: its contact (matched by email and phone within the
    lead's store or the shared pool, else created: crm.identity), its timeline events and, for a lead sales
    works, an outreach task with the SLA and quiet hours of its store and an owner. One transaction.

    Every write is an insert-if-absent or a forward-only update, so processing
    the same lead again, at the same time or later, changes nothing. Raises
    LeadNotFound, or LeadIncomplete for a lead without a phone or an email.
    """
    outcome = leads_created_process(lead_ids=[lead_id])[lead_id]
    if isinstance(outcome, Exception):
        raise outcome
    return outcome


def leads_created_process(*, lead_ids) -> dict[int, LeadProcessed | Exception]:
    """`lead_created_process` of several leads in one transaction, with what processing them one after another
    would give, in a few statements for them all rather than a dozen each. A lead that does not exist or lacks
    what a contact needs gets its exception (LeadNotFound, LeadIncomplete) as its outcome, and writes nothing."""
    lead_ids = list(dict.fromkeys(lead_ids))
    outcomes: dict[int, LeadProcessed | Exception] = {}
    arrivals = []  # (lead, person, arrived at) of the leads processed
    contact_ids: dict[int, int] = {}
    with_task: set[int] = set()
    with transaction.atomic():
        leads = lead_selectors.leads_for_processing(lead_ids=lead_ids, fields=LEAD_FIELDS, store_fields=STORE_FIELDS)
        for lead_id in lead_ids:
            lead = leads.get(lead_id)
            if lead is None:
                outcomes[lead_id] = lead_selectors.LeadNotFound(f"lead {lead_id} does not exist")
            elif lead.is_test or lead.status != QUALIFIED_STATUS:
                logger.info("lead_not_processed", lead_id=lead_id, status=lead.status, is_test=lead.is_test)
                outcomes[lead_id] = LeadProcessed(contact_id=None, task_created=False)
            elif missing := lead_created_missing_fields(lead):
                outcomes[lead_id] = LeadIncomplete(f"lead {lead_id} lacks {', '.join(missing)}")
            elif not ((person := _lead_person(lead)).email or person.phone):
                outcomes[lead_id] = LeadIncomplete(f"lead {lead_id} lacks a valid phone or email")
            else:
                # The time the lead arrived, not now: a lead processed late must not look fresh.
                arrivals.append((lead, person, lead.received_at or lead.created_at))
        if arrivals:
            contact_ids |= _leads_contact_ids([lead.pk for lead, _, _ in arrivals])
            unresolved = [arrival for arrival in arrivals if arrival[0].pk not in contact_ids]
            resolved = contacts_resolve([(lead.store_id, person, arrived) for lead, person, arrived in unresolved])
            contact_ids |= {lead.pk: contact_id for (lead, _, _), contact_id in zip(unresolved, resolved, strict=True)}
            with_task = _outreach_tasks_insert(arrivals, contact_ids)
            chat_leads = [lead.pk for lead, _, _ in arrivals if lead.channel != EMAIL_CHANNEL]
            sessions = chat_selectors.chat_sessions_linked(lead_ids=chat_leads) if chat_leads else {}
            events = [
                event
                for lead, person, arrived in arrivals
                for event in _lead_events(lead, person, contact_ids[lead.pk], arrived, sessions.get(lead.pk, []))
            ]
            insert_many_on_conflict(events, on_conflict="ON CONFLICT DO NOTHING")  # their keys: a replay adds none
    for lead, _, _ in arrivals:
        outcomes[lead.pk] = LeadProcessed(contact_id=contact_ids[lead.pk], task_created=lead.pk in with_task)
        logger.info(
            "lead_processed", lead_id=lead.pk, contact_id=contact_ids[lead.pk], task_created=lead.pk in with_task
        )
    return outcomes


def docs_sign_in_record(*, tracked_user_id: int, email: str, first_name: str, last_name: str, company: str,
                        at: datetime) -> int:  # fmt: skip
    """A docs reader signed in with a verified email: they join the shared pool's contact of that email (created
    when there is none) and the sign-in goes on its timeline. Runs in the caller's transaction. The contact id."""
    person = Person(email=email_key(email), first_name=first_name, last_name=last_name, company=company)
    with transaction.atomic():
        contact_id = contact_resolve(store_id=None, person=person, seen_at=at)
        event = _event(
            contact_id=contact_id, store_id=None, person=person, event_type=DOCS_SIGNED_IN_EVENT, category="docs",
            entity_type="tracked_user", entity_id=tracked_user_id, occurred_at=at, actor_type="docs_reader",
            new_value={}, key=f"{DOCS_SIGNED_IN_EVENT}:{tracked_user_id}:{at.isoformat()}",
        )  # fmt: skip
        insert_on_conflict(event, on_conflict="ON CONFLICT DO NOTHING")
    return contact_id


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
                _task_event(
                    task,
                    event_type=TASK_DONE_EVENT,
                    key=f"{TASK_DONE_EVENT}:{task.pk}",
                    actor=actor,
                    now=now,
                    reason="",
                )
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
    leads = lead_selectors.email_leads_complete_since(since=since).only("phone", "email", "store")
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


# --- data-subject requests (privacy/) ------------------------------------------------------------


def subject_erase(*, contact_ids, lead_ids) -> dict[str, int]:
    """Delete the contacts with their tasks and timelines, and the tasks the leads opened (on any contact).
    {model label: rows deleted}."""
    counts = dict(Task.objects.filter(Q(contact__in=contact_ids) | Q(source_lead__in=lead_ids)).delete()[1])
    for label, deleted in Contact.objects.filter(pk__in=contact_ids).delete()[1].items():
        counts[label] = counts.get(label, 0) + deleted
    return counts
