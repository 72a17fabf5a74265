"""Sales staff work contacts and tasks in the admin: timeline inline, overdue tasks, filters, mark done."""

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse
from django.utils import timezone
from pytest_django.asserts import assertContains, assertNotContains

from crm.models import Contact, Task
from crm.services import lead_created_process
from foundation.staff_groups import MANAGERS, SALES

pytestmark = pytest.mark.django_db


@pytest.fixture
def sales_client(client, django_user_model):
    user = django_user_model.objects.create_user("sales", is_staff=True)
    user.groups.add(Group.objects.get(name=SALES), Group.objects.get(name=MANAGERS))
    client.force_login(user)
    return client


def test_migrations_grant_sales_contacts_tasks_and_the_timeline():
    codenames = set(Group.objects.get(name=SALES).permissions.filter(content_type__app_label="crm").values_list(
        "codename", flat=True))  # fmt: skip
    assert codenames == {
        "view_contact", "change_contact", "view_task", "add_task", "change_task", "view_timelineevent",
    }  # fmt: skip


def test_a_contact_shows_its_tasks_and_timeline(sales_client, make_lead):
    lead = make_lead(received_at=datetime(2026, 6, 10, 16, 0, tzinfo=UTC))
    contact = Contact.objects.get(pk=lead_created_process(lead_id=lead.pk).contact_id)

    page = sales_client.get(reverse("admin:crm_contact_change", args=[contact.pk]))

    assertContains(page, "lead.created")
    assertContains(page, "lead_webhook")
    assertContains(page, "New Web Lead from Jane Doe")
    listing = sales_client.get(reverse("admin:crm_contact_changelist"), {"q": "+14155550132"})
    assert list(listing.context["cl"].result_list) == [contact]


def test_tasks_list_highlights_overdue_ones_and_filters_by_store_status_and_due(sales_client, make_lead, store):
    now = timezone.now()
    # Leads received minutes before the test runs: quiet hours would make the outcome depend on the hour.
    store.quiet_hours_end = store.quiet_hours_start
    store.save()
    other_store = store.__class__.objects.create(franchise="OrangeTheory", name="Uptown", account_id="acct-1")
    elsewhere = make_lead(received_at=now, store=other_store, account_id="acct-1")
    lead_created_process(lead_id=elsewhere.pk)
    late_lead = make_lead(received_at=now - timedelta(hours=1))
    lead_created_process(lead_id=late_lead.pk)
    overdue = Task.objects.get(source_lead=late_lead)
    upcoming_lead = make_lead(phone="+14155550177", received_at=now - timedelta(minutes=1))
    lead_created_process(lead_id=upcoming_lead.pk)
    upcoming = Task.objects.get(source_lead=upcoming_lead)

    listing = sales_client.get(reverse("admin:crm_task_changelist"))
    assertContains(listing, 'class="overdue"', count=1)
    specs = {spec.title for spec in listing.context["cl"].filter_specs}
    assert {"status", "due", "store", "priority"} <= specs

    def listed(**params):
        return set(sales_client.get(reverse("admin:crm_task_changelist"), params).context["cl"].result_list)

    assert listed(due="overdue") == {overdue}
    assert listed(due="today") == {upcoming, Task.objects.get(source_lead=elsewhere)}
    assert listed(status__exact="pending", store__id__exact=store.pk) == {overdue, upcoming}
    assert listed(status__exact="done") == set()


def test_mark_done_closes_the_selected_pending_tasks(sales_client, make_lead):
    lead_created_process(lead_id=make_lead().pk)
    task = Task.objects.get()
    response = sales_client.post(
        reverse("admin:crm_task_changelist"), {"action": "mark_done", "_selected_action": [str(task.pk)]}, follow=True
    )
    assertContains(response, "Marked 1 task(s) done.")
    task.refresh_from_db()
    assert (task.status, task.completed_by) == ("done", "sales") and task.completed_at is not None
    assertNotContains(sales_client.get(reverse("admin:crm_task_changelist")), 'class="overdue"')


def test_sales_adds_a_follow_up_task_but_never_a_second_pending_one_of_a_kind(sales_client, make_lead, store):
    contact = Contact.objects.get(pk=lead_created_process(lead_id=make_lead().pk).contact_id)
    form = {
        "contact": contact.pk, "type_category": "lead_outreach", "status": "pending", "priority": "normal",
        "due_at_0": "2026-06-12", "due_at_1": "09:00:00", "action_needed": "on",
        "action_needed_reason": "Second try", "suggested_actions": "[]",
    }  # fmt: skip
    refused = sales_client.post(reverse("admin:crm_task_add"), form)
    assert refused.status_code == 200, "a form error, not a database error"
    assert "already has a pending task" in str(refused.context["adminform"].form.errors)

    Task.objects.update(status="done")
    created = sales_client.post(reverse("admin:crm_task_add"), form)
    assert created.status_code == 302
    task = Task.objects.get(status="pending")
    assert (task.store, task.task_type, task.source_type) == (store, "lead_outreach", "staff")
    assert task.franchise == "OrangeTheory"
