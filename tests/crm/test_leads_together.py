"""Leads processed together (services.leads_created_process, as a worker runs a run message's LeadCreated jobs)
come out exactly as the same leads processed one after another: contacts, tasks, owners, timeline, outcomes."""

from datetime import UTC, datetime, time, timedelta

import pytest
from django.contrib.auth.models import Group

from crm.models import AssignmentRule, Contact, RepProfile, Task, TimelineEvent
from crm.services import LeadIncomplete, LeadProcessed, lead_created_process, leads_created_process
from foundation.staff_groups import SALES
from leadgen.selectors import LeadNotFound
from tests.factories import EmailLeadFactory, StoreFactory

pytestmark = pytest.mark.django_db

NOON = datetime(2026, 6, 10, 12, 0, tzinfo=UTC)  # a Wednesday
ALL_WEEK = [1, 2, 3, 4, 5, 6, 7]


def office(prefix: str, django_user_model):
    """A store with three reps (cat takes one lead at most, and a rule gives her diagnostic leads), two
    contacts already known, and twelve leads that meet each other and those contacts in every way the
    processor tells apart. The leads' ids, in arrival order, and the store."""
    store = StoreFactory(timezone="UTC")
    for name, cap in (("ana", 200), ("bob", 200), ("cat", 1)):
        user = django_user_model.objects.create_user(f"{prefix}-{name}", is_staff=True)
        user.groups.add(Group.objects.get(name=SALES))
        store.staff.add(user)
        RepProfile.objects.create(
            user=user, work_days=ALL_WEEK, work_start=time(0, 0), work_end=time(0, 0), max_open_tasks=cap
        )
    cat = django_user_model.objects.get(username=f"{prefix}-cat")
    AssignmentRule.objects.create(store=store, service_type="diagnostic", owner=cat, priority=1)
    known = {"store": store, "franchise": store.franchise, "account_id": store.account_id}
    Contact.objects.create(**known, email="x@example.com", first_name="Xavier", last_activity_at=NOON)
    Contact.objects.create(**known, phone="+14155550001", last_activity_at=NOON - timedelta(days=1))

    def lead(minutes, **fields):
        values = {"store": store, "received_at": NOON + timedelta(minutes=minutes), "email": "", "phone": ""}
        return EmailLeadFactory(**values | fields).pk

    leads = [
        lead(1, email="jane@example.com", phone="+14155550100"),
        lead(2, email="JANE@example.com ", first_name="Janet"),  # the same person: joins, no second task
        lead(3, email="x@example.com", phone="+14155550001"),  # the email's contact, the phone's is left alone
        lead(4, email="other@example.com", phone="+14155550100"),  # Jane's phone: her contact, keeps her email
        lead(5, email="test@example.com", is_test=True),
        lead(6, email="spam@example.com", status="spam"),
        lead(7, email="d1@example.com", service_type="diagnostic"),  # the rule: cat
        lead(8, email="d2@example.com", service_type="diagnostic"),  # cat is at her cap: round-robin
        lead(9, first_name="Nobody"),  # no phone, no email
        lead(10, phone="+14155550199", last_name=""),
        lead(11, phone="+14155550199", last_name="Late", company="Acme"),  # fills the name and company
        lead(12, email="zed@example.com", phone="not a phone"),
    ]
    return leads, store


def seen(store, leads, outcomes) -> dict:
    """What sales would see of the store, with ids replaced by what they stand for."""
    order = {lead_id: n for n, lead_id in enumerate(leads)}

    def who(contact_id):
        contact = Contact.objects.get(pk=contact_id)
        return (contact.email, contact.phone)

    def outcome(value):
        if isinstance(value, Exception):
            return (type(value).__name__, str(value).replace(str(leads[order_of(value)]), "#"))
        return (who(value.contact_id) if value.contact_id else None, value.task_created)

    def order_of(error):
        return next(n for n, lead_id in enumerate(leads) if f"lead {lead_id} " in str(error))

    return {
        "contacts": sorted(
            Contact.objects.filter(store=store).values_list(
                "email",
                "phone",
                "first_name",
                "last_name",
                "company",
                "lead_status",
                "last_activity_at",
            )
        ),
        "tasks": sorted(
            (
                order[task.source_lead_id],
                who(task.contact_id),
                task.status,
                task.due_at,
                task.assigned_to.username.split("-", 1)[1] if task.assigned_to else None,
            )
            for task in Task.objects.filter(store=store).select_related("assigned_to")
        ),
        "timeline": sorted(
            (event.event_type, order[int(event.entity_id)], who(event.contact_id), event.occurred_at)
            for event in TimelineEvent.objects.filter(store=store)
        ),
        "outcomes": [outcome(outcomes[lead_id]) for lead_id in leads if lead_id in outcomes],
    }


def one_after_another(lead_ids) -> dict:
    outcomes = {}
    for lead_id in lead_ids:
        try:
            outcomes[lead_id] = lead_created_process(lead_id=lead_id)
        except (LeadNotFound, LeadIncomplete) as exc:
            outcomes[lead_id] = exc
    return outcomes


def test_leads_processed_together_come_out_as_processed_one_after_another(django_user_model):
    alone, alone_store = office("a", django_user_model)
    together, together_store = office("b", django_user_model)

    expected = seen(alone_store, alone, one_after_another(alone))
    got = seen(together_store, together, leads_created_process(lead_ids=together))

    assert got == expected
    assert expected["outcomes"][1] == (("jane@example.com", "+14155550100"), False), "Jane again: no second task"
    assert expected["outcomes"][8][0] == "LeadIncomplete"
    assert [(n, owner) for n, _, _, _, owner in expected["tasks"]] == [
        (0, "ana"), (2, "bob"), (6, "cat"), (7, "ana"), (9, "bob"), (11, "ana"),
    ]  # fmt: skip


def test_processing_leads_together_again_changes_nothing(django_user_model):
    leads, store = office("c", django_user_model)
    leads_created_process(lead_ids=leads)
    before = seen(store, leads, {})
    again = leads_created_process(lead_ids=[*reversed(leads), leads[0]])
    assert seen(store, leads, {}) == before
    assert again[leads[0]] == LeadProcessed(contact_id=again[leads[0]].contact_id, task_created=False)


def test_a_lead_that_is_gone_does_not_stop_the_others(django_user_model):
    leads, store = office("d", django_user_model)
    outcomes = leads_created_process(lead_ids=[leads[0], 10**9, leads[9]])
    assert isinstance(outcomes[10**9], LeadNotFound)
    assert outcomes[leads[0]].task_created and outcomes[leads[9]].task_created
    assert Task.objects.filter(store=store).count() == 2
