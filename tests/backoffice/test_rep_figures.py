"""Managers see each owner's first-response figures on the dashboard, for the stores they see; Sales do not."""

from datetime import timedelta
from itertools import count

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse
from django.utils import timezone

from backoffice import dashboard
from crm.models import Contact, Task
from foundation.staff_groups import MANAGERS, SALES

pytestmark = pytest.mark.django_db

_numbers = count(1)


def task(store, owner, *, due_ago: timedelta, took: timedelta | None = None) -> Task:
    """An outreach task that fell due `due_ago` ago; done `took` after the lead arrived (5 minutes before due)."""
    n = next(_numbers)
    due = timezone.now() - due_ago
    arrived = due - timedelta(minutes=5)
    contact = Contact.objects.create(store=store, phone=f"+1415555{n:04d}", franchise="OrangeTheory")
    return Task.objects.create(
        contact=contact, store=store, task_type="lead_outreach", type_category="lead_outreach", source_type="lead",
        due_at=due, arrived_at=arrived, assigned_to=owner, status="done" if took else "pending",
        completed_at=arrived + took if took else None,
    )  # fmt: skip


@pytest.fixture
def reps(downtown, uptown, staff):
    ana, ben = staff("ana", SALES, stores=[downtown]), staff("ben", SALES, stores=[downtown])
    cy = staff("cy", SALES, stores=[uptown])
    hour = timedelta(hours=1)
    task(downtown, ana, due_ago=hour, took=timedelta(minutes=3))
    task(downtown, ana, due_ago=hour, took=timedelta(minutes=5))
    task(downtown, ana, due_ago=hour, took=timedelta(minutes=40))  # late
    task(downtown, ben, due_ago=hour)  # overdue
    task(downtown, None, due_ago=timedelta(minutes=1))  # nobody's, overdue
    task(uptown, cy, due_ago=hour, took=timedelta(minutes=1))
    return ana, ben, cy


def test_figures_per_owner_of_the_stores_asked_for(reps, downtown):
    ana, ben, _ = reps
    period = dashboard.Period.last_days(30)
    rows = dashboard.first_response_by_rep(period=period, store_ids={downtown.pk})
    figures = [(r.username, r.due, r.done, r.done_within_sla, r.median_seconds, r.overdue_now) for r in rows]
    assert figures == [("ana", 3, 3, 2, 300.0, 0), ("ben", 1, 0, 0, None, 1), ("", 1, 0, 0, None, 1)]
    assert [r.user_id for r in rows] == [ana.pk, ben.pk, None]


def test_managers_see_every_reps_row_and_sales_see_none(reps, staff, client):
    client.force_login(staff("boss", SALES, MANAGERS))
    page = client.get(reverse("admin:index")).content.decode()
    assert 'id="dashboard-reps"' in page
    for name in ("ana", "ben", "cy", "nobody (unassigned)"):
        assert f">{name}</a>" in page

    client.force_login(reps[0])
    page = client.get(reverse("admin:index")).content.decode()
    assert 'id="dashboard-sla"' in page and 'id="dashboard-reps"' not in page


def test_a_store_manager_sees_the_reps_of_their_stores_only(reps, staff, client, downtown):
    lead = staff("lead", SALES, stores=[downtown])
    lead.user_permissions.add(Permission.objects.get(codename="view_repprofile"))
    client.force_login(lead)
    page = client.get(reverse("admin:index")).content.decode()
    assert ">ana</a>" in page and ">ben</a>" in page and ">cy</a>" not in page
    owned = f"{reverse('admin:crm_task_changelist')}?"
    assert f"assigned_to__id__exact={reps[0].pk}" in page and owned in page
