"""A task past its due time without a response: the owner's manager hears of it (outside quiet hours), and the
store may hand the task to the next rep on shift."""

from datetime import UTC, datetime, time, timedelta
from itertools import count

import pytest
from django.contrib.auth.models import Group, Permission
from django.core import mail
from django.utils import timezone

import jobs
from crm.escalation import escalation_start, overdue_tasks_escalate
from crm.models import Contact, RepProfile, Task, TimelineEvent
from foundation.schedules import PERIODIC_TASKS
from foundation.staff_groups import MANAGERS, SALES
from jobs.models import Job
from tests.conftest import minute_with_time_left

pytestmark = pytest.mark.django_db

ALL_WEEK = [1, 2, 3, 4, 5, 6, 7]
# The store (fixture) is in New York with quiet hours 21:00–08:00; 13:55 UTC is 09:55 there.
DUE = datetime(2026, 6, 10, 13, 55, tzinfo=UTC)
_numbers = count(1)


@pytest.fixture
def make_user(django_user_model, store):

    def make(name, *, groups=(SALES,), stores=None, rep=True, **profile):
        user = django_user_model.objects.create_user(name, email=f"{name}@staff.example.com", is_staff=True)
        user.groups.add(*Group.objects.filter(name__in=groups))
        for each in [store] if stores is None else stores:
            each.staff.add(user)
        if rep:
            hours = {"work_days": ALL_WEEK, "work_start": time(0), "work_end": time(0)}  # all week, all day
            RepProfile.objects.create(user=user, **{**hours, **profile})
        return user

    return make


def pending_task(store, owner=None, *, due_at=DUE) -> Task:
    n = next(_numbers)
    contact = Contact.objects.create(
        store=store, phone=f"+1415555{n:04d}", first_name="Jane", franchise="OrangeTheory", account_id="acct-0421"
    )
    return Task.objects.create(
        contact=contact, store=store, task_type="lead_outreach", type_category="lead_outreach", source_type="lead",
        due_at=due_at, assigned_to=owner, arrived_at=due_at - timedelta(minutes=5),
    )  # fmt: skip


def alerts() -> list[Job]:
    return list(Job.objects.filter(kind="crm.escalation_alert").order_by("pk"))


def send_alerts() -> None:
    for job in alerts():
        jobs.run_now(job.pk)


def test_the_owners_manager_hears_once_the_due_time_passes(make_user, store):
    boss = make_user("boss", rep=False)
    owner = make_user("owner", manager=boss)
    task = pending_task(store, owner)

    assert overdue_tasks_escalate(now=DUE - timedelta(minutes=1)) == 0, "not due yet"
    assert overdue_tasks_escalate(now=DUE + timedelta(minutes=1)) == 1
    task.refresh_from_db()
    assert task.escalated_at == DUE + timedelta(minutes=1) and task.assigned_to == owner
    assert overdue_tasks_escalate(now=DUE + timedelta(minutes=2)) == 0, "escalated once"

    send_alerts()
    [email] = mail.outbox
    assert email.to == ["boss@staff.example.com"]
    assert "09:55 EDT" in email.body and "Owner: owner." in email.body
    assert f"/admin/crm/task/{task.pk}/change/" in email.body
    assert "Jane" not in email.body and "+1415" not in email.body, "the email names no lead"
    assert alerts()[0].payload == {"task_id": str(task.pk), "owner_id": owner.pk, "due_at": DUE.isoformat()}
    event = TimelineEvent.objects.get(event_type="task.escalated")
    assert (event.contact_id, event.new_value["owner"]) == (task.contact_id, "owner")


def test_nobody_is_alerted_in_the_stores_quiet_hours(make_user, store):
    boss = make_user("boss", rep=False)
    # Snoozed to 00:30 in New York: it passes its due time in the night.
    task = pending_task(store, make_user("owner", manager=boss), due_at=datetime(2026, 6, 11, 4, 30, tzinfo=UTC))

    assert overdue_tasks_escalate(now=datetime(2026, 6, 11, 5, 0, tzinfo=UTC)) == 0, "01:00 in New York"
    assert overdue_tasks_escalate(now=datetime(2026, 6, 11, 11, 59, tzinfo=UTC)) == 0, "07:59"
    assert overdue_tasks_escalate(now=datetime(2026, 6, 11, 12, 0, tzinfo=UTC)) == 1, "08:00: quiet hours over"
    task.refresh_from_db()
    assert task.escalated_at == datetime(2026, 6, 11, 12, 0, tzinfo=UTC)


def test_the_shared_pool_keeps_its_own_quiet_hours(make_user, settings):
    settings.SHARED_POOL_TIMEZONE = "Europe/London"
    settings.SHARED_POOL_QUIET_HOURS_START, settings.SHARED_POOL_QUIET_HOURS_END = time(22, 0), time(7, 0)
    boss = make_user("boss", rep=False, stores=[])
    pending_task(None, make_user("owner", stores=[], groups=(SALES, MANAGERS), manager=boss))

    assert overdue_tasks_escalate(now=datetime(2026, 6, 10, 21, 30, tzinfo=UTC)) == 0, "22:30 in London"
    assert overdue_tasks_escalate(now=datetime(2026, 6, 11, 6, 0, tzinfo=UTC)) == 1, "07:00 in London"
    send_alerts()
    assert mail.outbox[0].to == ["boss@staff.example.com"]
    assert "the shared pool" in mail.outbox[0].body and "14:55 BST" in mail.outbox[0].body


def test_a_snoozed_task_is_escalated_again_when_it_passes_its_new_due_time(make_user, store):
    task = pending_task(store, make_user("owner", manager=make_user("boss", rep=False)))
    overdue_tasks_escalate(now=DUE + timedelta(minutes=1))
    Task.objects.filter(pk=task.pk).update(due_at=DUE + timedelta(hours=1))

    assert overdue_tasks_escalate(now=DUE + timedelta(minutes=30)) == 0
    assert overdue_tasks_escalate(now=DUE + timedelta(hours=1, minutes=1)) == 1
    assert len(alerts()) == 2


def test_without_a_manager_of_their_own_the_stores_managers_hear(make_user, store, django_user_model):
    make_user("manager_all", rep=False, stores=[], groups=(SALES, MANAGERS))  # every store, manages reps
    local = make_user("local_lead", rep=False)
    local.user_permissions.add(Permission.objects.get(codename="change_repprofile"))
    uptown = store.__class__.objects.create(franchise="OrangeTheory", name="Uptown", account_id="acct-9")
    elsewhere = make_user("elsewhere_lead", rep=False, stores=[uptown])
    elsewhere.user_permissions.add(Permission.objects.get(codename="change_repprofile"))
    make_user("colleague")  # a rep of the store: not a manager
    django_user_model.objects.create_superuser("root", email="root@staff.example.com")
    pending_task(store, make_user("owner"))  # no manager
    pending_task(store, None, due_at=DUE + timedelta(minutes=1))  # nobody owns it

    overdue_tasks_escalate(now=DUE + timedelta(minutes=5))
    send_alerts()

    assert [sorted(email.to) for email in mail.outbox] == [
        ["local_lead@staff.example.com", "manager_all@staff.example.com"]
    ] * 2
    assert "Owner: nobody (unassigned)." in mail.outbox[1].body


def test_a_task_answered_before_the_alert_goes_out_alerts_nobody(make_user, store):
    task = pending_task(store, make_user("owner", manager=make_user("boss", rep=False)))
    overdue_tasks_escalate(now=DUE + timedelta(minutes=1))
    Task.objects.filter(pk=task.pk).update(status="done", completed_at=DUE + timedelta(minutes=2))
    send_alerts()
    assert mail.outbox == [] and alerts()[0].status == "skipped"


def test_a_store_that_says_so_hands_the_overdue_task_to_the_next_rep_on_shift(make_user, store):
    store.reassign_overdue = True
    store.save()
    boss = make_user("boss", rep=False)
    owner = make_user("owner", manager=boss)
    make_user("off", work_days=[])
    make_user("away", is_away=True)
    next_rep = make_user("next_rep")
    task = pending_task(store, owner)

    overdue_tasks_escalate(now=DUE + timedelta(minutes=1))

    task.refresh_from_db()
    assert task.assigned_to == next_rep
    moved = TimelineEvent.objects.get(event_type="task.reassigned")
    assert moved.new_value == {"from": "owner", "to": "next_rep", "reason": "overdue", "by": "system"}
    send_alerts()
    assert mail.outbox[0].to == ["boss@staff.example.com"], "the manager of the rep who let it pass"
    assert "It has been reassigned to next_rep." in mail.outbox[0].body


def test_a_store_that_does_not_reassign_keeps_the_owner(make_user, store):
    owner = make_user("owner")
    make_user("next_rep")
    task = pending_task(store, owner)
    overdue_tasks_escalate(now=DUE + timedelta(minutes=1))
    task.refresh_from_db()
    assert task.assigned_to == owner and task.escalated_at is not None
    assert not TimelineEvent.objects.filter(event_type="task.reassigned").exists()


def test_with_nobody_else_on_shift_the_task_stays_with_its_owner(make_user, store):
    store.reassign_overdue = True
    store.save()
    owner = make_user("owner")
    make_user("off", work_days=[])
    task = pending_task(store, owner)
    overdue_tasks_escalate(now=DUE + timedelta(minutes=1))
    task.refresh_from_db()
    assert task.assigned_to == owner and task.escalated_at is not None


def test_beat_queues_the_escalation_job_which_escalates(make_user, store):
    assert PERIODIC_TASKS["crm: alert managers of tasks past their due time"]["task"] == "crm.escalate_overdue"
    store.quiet_hours_end = store.quiet_hours_start  # none: the test runs at any hour
    store.save()
    task = pending_task(store, make_user("owner", manager=make_user("boss", rep=False)),
                        due_at=timezone.now() - timedelta(minutes=1))  # fmt: skip

    minute_with_time_left()
    escalation_start()
    escalation_start()  # the same minute: the same job
    [job] = Job.objects.filter(kind="crm.escalate_overdue")
    jobs.run_now(job.pk)

    task.refresh_from_db()
    assert task.escalated_at is not None
    assert [alert.payload["task_id"] for alert in alerts()] == [str(task.pk)]
