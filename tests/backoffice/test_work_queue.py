"""Sales work the queue: contacted, done and snooze, each on the contact's timeline, never twice."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse
from django.utils import timezone

from crm.models import Contact, Task, TimelineEvent
from foundation.staff_groups import SALES

pytestmark = pytest.mark.django_db


@pytest.fixture
def queue(make_email_lead, downtown, staff, client):
    lead = make_email_lead(downtown, received_at=timezone.now() - timedelta(hours=1))
    client.force_login(staff("ana", SALES, stores=[downtown]))
    return client, Task.objects.get(source_lead=lead)


def act(client, task, **form):
    form.setdefault("seen", task.updated_at.isoformat())
    return client.post(reverse("admin:crm_task_queue_act", args=[task.pk]), form, follow=True)


def messages_of(response):
    return [str(message) for message in response.context["messages"]]


def events(task):
    task_events = TimelineEvent.objects.filter(entity_type="task", entity_id=str(task.pk))
    return list(task_events.values_list("event_type", flat=True))


def test_the_queue_lists_the_overdue_task_highlighted_with_its_contact(queue):
    client, task = queue
    page = client.get(reverse("admin:crm_task_queue"), {"view": "due_soon"})
    html = page.content.decode()
    assert 'class="task overdue"' in html and "overdue</b>" in html
    assert reverse("admin:crm_contact_change", args=[task.contact_id]) in html
    assert list(page.context["tasks"]) == [task]


def test_contacted_closes_the_task_connects_the_contact_and_records_it(queue):
    client, task = queue
    response = act(client, task, action="contacted", reason="called, booked a class")
    assert messages_of(response) == [f"{task.contact}: marked contacted."]
    task.refresh_from_db()
    assert (task.status, task.completed_by) == ("done", "ana")
    assert Contact.objects.get(pk=task.contact_id).lead_status == "connected"
    event = TimelineEvent.objects.get(event_type="task.contacted")
    assert event.new_value == {"by": "ana", "reason": "called, booked a class"} and event.actor_type == "staff"


def test_done_twice_from_the_same_page_records_once(queue):
    client, task = queue
    seen = task.updated_at.isoformat()
    act(client, task, action="done", seen=seen)
    again = act(client, task, action="done", seen=seen)
    assert "changed meanwhile" in messages_of(again)[0]
    assert events(task) == ["task.done"]
    assert Contact.objects.get(pk=task.contact_id).lead_status == "new"  # done is not contacted


def test_snooze_moves_the_due_time_with_a_reason_on_the_timeline(queue):
    client, task = queue
    before = task.due_at
    act(client, task, action="snooze", snooze="240", reason="asked to call after work")
    task.refresh_from_db()
    assert task.status == "pending"
    assert timedelta(hours=3, minutes=59) < task.due_at - timezone.now() <= timedelta(hours=4)
    event = TimelineEvent.objects.get(event_type="task.snoozed")
    assert event.new_value["reason"] == "asked to call after work"
    assert event.new_value["due_before"] == before.isoformat()


def test_snooze_without_a_reason_or_a_bad_form_changes_nothing(queue):
    client, task = queue
    response = act(client, task, action="snooze", snooze="240", reason="  ")
    assert messages_of(response) == ["Nothing changed: reason: Say why the task waits."]
    bad = act(client, task, action="delete", seen="yesterday")
    assert messages_of(bad)[0].startswith("Nothing changed: action:") and "seen:" in messages_of(bad)[0]
    task.refresh_from_db()
    assert task.due_at == Task.objects.get(pk=task.pk).due_at and events(task) == []


def test_the_bulk_action_records_each_task_on_its_timeline(queue):
    client, task = queue
    client.post(reverse("admin:crm_task_changelist"), {"action": "mark_done", "_selected_action": [str(task.pk)]})
    assert events(task) == ["task.done"]


def test_viewers_without_change_permission_see_no_action_and_cannot_post(queue, staff, downtown):
    client, task = queue
    viewer = staff("viewer", stores=[downtown])
    viewer.user_permissions.add(Permission.objects.get(codename="view_task"))
    client.force_login(viewer)
    page = client.get(reverse("admin:crm_task_queue"), {"view": "due_soon"})
    assert page.status_code == 200 and "task-action" not in page.content.decode()
    assert act(client, task, action="done").status_code == 403


def test_a_task_is_assigned_among_the_stores_staff_and_shows_in_their_queue(
    make_email_lead, downtown, uptown, staff, client
):
    task = Task.objects.get(source_lead=make_email_lead(downtown, received_at=timezone.now()))
    ana, ben = staff("ana", SALES, stores=[downtown]), staff("ben", SALES, stores=[downtown])
    staff("uma", SALES, stores=[uptown])
    client.force_login(ana)
    form = client.get(reverse("admin:crm_task_change", args=[task.pk])).context["adminform"].form
    assert [user.username for user in form.fields["assigned_to"].queryset] == ["ana", "ben"]
    Task.objects.filter(pk=task.pk).update(assigned_to=ben)
    client.force_login(ben)
    assert list(client.get(reverse("admin:crm_task_queue")).context["tasks"]) == [task]
