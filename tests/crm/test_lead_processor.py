"""The LeadCreated processor: contact upsert, outreach task, timeline event; replays change nothing."""

from datetime import UTC, datetime, timedelta

import pytest
from django.forms.models import model_to_dict

import jobs
from crm.intake import LEAD_CREATED, lead_created_key
from crm.models import Contact, Task, TimelineEvent
from crm.services import lead_created_process, tasks_mark_done
from jobs.models import Job

pytestmark = pytest.mark.django_db

NOON = datetime(2026, 6, 10, 16, 0, tzinfo=UTC)  # 12:00 in New York


def snapshot() -> dict:
    return {
        model.__name__: sorted((model_to_dict(row) | {"updated": getattr(row, "updated_at", None)} for row in
                                model.objects.all()), key=str)
        for model in (Contact, Task, TimelineEvent)
    }  # fmt: skip


def test_a_new_contact_starts_as_a_new_lead_with_an_outreach_task_and_a_timeline_event(make_lead, store):
    lead = make_lead(received_at=NOON)
    result = lead_created_process(lead_id=lead.pk)

    contact = Contact.objects.get()
    assert result.contact_id == contact.pk and result.task_created
    assert (contact.phone, contact.store, contact.franchise, contact.account_id) == (
        "+14155550132", store, "OrangeTheory", "acct-0421",
    )  # fmt: skip
    assert (contact.lifecycle_stage, contact.lead_status, contact.first_name, contact.last_name) == (
        "lead", "new", "Jane", "Doe",
    )  # fmt: skip
    assert contact.last_activity_at == NOON, "the lead's arrival, not the processing time"

    task = Task.objects.get()
    assert (task.contact, task.store, task.source_lead, task.source_type) == (contact, store, lead, "lead")
    assert (task.task_type, task.type_category, task.status, task.priority) == (
        "lead_outreach", "lead_outreach", "pending", "high",
    )  # fmt: skip
    assert task.action_needed and task.action_needed_reason == "New Web Lead from Jane Doe"
    assert task.due_at == NOON + timedelta(minutes=5)
    assert task.suggested_actions == [
        {
            "action": "call", "priority": "high", "title": "Call the new lead back now",
            "detail": "Leads called within 5 minutes of arriving convert best: call before the due time.",
        }
    ]  # fmt: skip

    event = TimelineEvent.objects.get()
    assert (event.contact, event.store, event.franchise, event.account_id) == (
        contact, store, "OrangeTheory", "acct-0421",
    )  # fmt: skip
    assert (event.event_type, event.event_category, event.entity_type, event.entity_id) == (
        "lead.created", "lead", "lead", str(lead.pk),
    )  # fmt: skip
    assert (event.occurred_at, event.actor_type) == (NOON, "lead_webhook")
    assert event.idempotency_key == f"lead.created:{lead.pk}"
    assert event.new_value == {"channel": "email", "leadType": "Web Lead", "firstName": "Jane", "lastName": "Doe"}


def test_a_lead_at_night_is_due_when_the_store_opens(make_lead):
    lead = make_lead(received_at=datetime(2026, 6, 11, 2, 30, tzinfo=UTC))  # 22:30 in New York
    lead_created_process(lead_id=lead.pk)
    assert Task.objects.get().due_at == datetime(2026, 6, 11, 12, 0, tzinfo=UTC)  # 08:00 EDT


def test_the_reason_names_an_unknown_lead_plainly(make_lead):
    lead = make_lead(first_name="", last_name="", lead_type="Online Intro")
    lead_created_process(lead_id=lead.pk)
    assert Task.objects.get().action_needed_reason == "New Online Intro from unknown"


def test_an_existing_contact_keeps_its_stage_gains_missing_names_and_activity_only_moves_forward(make_lead):
    lead_created_process(lead_id=make_lead(received_at=NOON, first_name="Jane", last_name="").pk)
    contact = Contact.objects.get()
    Contact.objects.filter(pk=contact.pk).update(lifecycle_stage="customer", lead_status="qualified")

    later = NOON + timedelta(hours=2)
    lead_created_process(lead_id=make_lead(received_at=later, first_name="Janet", last_name="Doe").pk)
    contact.refresh_from_db()
    assert (contact.lifecycle_stage, contact.lead_status) == ("customer", "qualified"), "managed elsewhere"
    assert (contact.first_name, contact.last_name) == ("Jane", "Doe"), "missing names filled, present ones kept"
    assert contact.last_activity_at == later

    older = NOON - timedelta(days=1)  # processed late, out of order
    lead_created_process(lead_id=make_lead(received_at=older, first_name="", last_name="").pk)
    contact.refresh_from_db()
    assert contact.last_activity_at == later, "an older lead never moves last activity back"
    assert Contact.objects.count() == 1
    assert TimelineEvent.objects.count() == 3
    assert sorted(TimelineEvent.objects.values_list("occurred_at", flat=True)) == [older, NOON, later]


def test_one_pending_outreach_task_per_contact_and_one_task_per_lead(make_lead, store):
    first = make_lead(received_at=NOON)
    assert lead_created_process(lead_id=first.pk).task_created
    second = make_lead(received_at=NOON + timedelta(hours=1))
    assert not lead_created_process(lead_id=second.pk).task_created, "the pending task already covers it"
    assert Task.objects.count() == 1

    tasks_mark_done(task_ids=[Task.objects.get().pk], actor="sales")
    third = make_lead(received_at=NOON + timedelta(hours=2))
    assert lead_created_process(lead_id=third.pk).task_created
    assert not lead_created_process(lead_id=third.pk).task_created, "a retried event adds no second task"
    assert sorted(Task.objects.values_list("status", flat=True)) == ["done", "pending"]

    other_store = store.__class__.objects.create(franchise="OrangeTheory", name="Uptown", account_id="acct-1")
    elsewhere = make_lead(received_at=NOON, store=other_store, account_id="acct-1")
    assert lead_created_process(lead_id=elsewhere.pk).task_created, "the same phone at another store is another contact"
    assert Contact.objects.count() == 2


def test_replaying_the_event_any_number_of_times_changes_nothing(make_lead):
    leads = [make_lead(received_at=NOON), make_lead(received_at=NOON + timedelta(hours=1), phone="+14155550177")]
    for lead in leads:
        lead_created_process(lead_id=lead.pk)
    before = snapshot()
    for _ in range(3):
        for lead in reversed(leads):
            lead_created_process(lead_id=lead.pk)
    assert snapshot() == before


def test_the_handler_runs_the_processor_and_dead_letters_what_it_cannot_process(make_lead, store):
    lead = make_lead()
    job = jobs.enqueue(LEAD_CREATED, {"lead_id": lead.pk}, key=lead_created_key(lead.pk))
    jobs.run_now(job.pk)
    job.refresh_from_db()
    assert job.status == Job.Status.SUCCEEDED and Contact.objects.count() == 1

    incomplete = make_lead(phone="")  # nothing to know the person by
    broken = jobs.enqueue(LEAD_CREATED, {"lead_id": incomplete.pk}, key=lead_created_key(incomplete.pk))
    missing = jobs.enqueue(LEAD_CREATED, {"lead_id": 10**9}, key=lead_created_key(10**9))
    for dead in (broken, missing):
        jobs.run_now(dead.pk)
        dead.refresh_from_db()
        assert dead.status == Job.Status.DEAD and dead.attempts == 1
    assert broken.last_error == f"permanent: lead {incomplete.pk} lacks phone or email"
    assert missing.last_error == f"permanent: lead {10**9} does not exist"
