"""Sales staff in admin: prototypes by state, the lead's prototype, retry and cancel; the recover command."""

import io
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from foundation.staff_groups import SALES
from jobs.models import Job
from leadgen.ratelimit import prototype_buckets_hold, prototype_buckets_state
from prototypes.models import Prototype
from tests.prototypes.conftest import make_lead, run_jobs, run_next_check

pytestmark = pytest.mark.django_db


def staff_client(client, *codenames, group=None):
    user = User.objects.create_user("sam", password="pw", is_staff=True)
    if group:
        user.groups.add(Group.objects.get_or_create(name=group)[0])
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    client.force_login(user)
    return client


@pytest.fixture
def sales_client(client):
    # Web-form leads belong to no store: their prototypes are for staff who see every store.
    return staff_client(
        client, "view_prototype", "change_prototype", "view_prototypeevent", "view_lead", "change_lead",
        "view_all_stores", group=SALES,
    )  # fmt: skip


def test_the_list_shows_prototypes_by_state_with_time_in_state(sales_client, fake_v0):
    make_lead()
    make_lead(email="grace@navy.example", first_name="Grace")
    Prototype.objects.filter(lead__email="grace@navy.example").update(
        state=Prototype.State.STALE, state_changed_at=timezone.now() - timedelta(minutes=17)
    )
    page = sales_client.get("/admin/prototypes/prototype/", {"state__exact": "stale"}).content.decode()
    # Whole names: a bare "Ada" can turn up inside the page's random CSRF token.
    assert "Grace Lovelace (" in page and "Ada Lovelace (" not in page
    assert "17\xa0minutes" in page, "time in state"


def test_the_prototype_page_links_the_v0_chat_and_the_lead_page_shows_its_prototype(sales_client, fake_v0):
    lead = make_lead()
    run_next_check()
    prototype = Prototype.objects.get()
    page = sales_client.get(f"/admin/prototypes/prototype/{prototype.pk}/change/").content.decode()
    assert f'href="https://v0.app/chat/{prototype.chat_id}"' in page
    assert "Starting your prototype" in page, "the event log"
    lead_page = sales_client.get(f"/admin/leadgen/lead/{lead.pk}/change/").content.decode()
    assert f"/admin/prototypes/prototype/{prototype.pk}/change/" in lead_page and ">Generating<" in lead_page


def test_cancel_drops_the_hold_and_retry_starts_again(sales_client, fake_v0):
    assert prototype_buckets_hold(email="ada@analytical.example", ip="192.0.2.10") is None
    make_lead()
    run_next_check()
    prototype = Prototype.objects.get()
    response = sales_client.post(
        "/admin/prototypes/prototype/", {"action": "cancel", "_selected_action": [prototype.pk]}, follow=True
    )
    assert "Cancelled 1 prototype(s)" in response.content.decode()
    run_jobs("prototypes.finished")
    assert not prototype_buckets_state(email="ada@analytical.example", ip=None)["email"].in_progress
    response = sales_client.post(
        "/admin/prototypes/prototype/", {"action": "retry", "_selected_action": [prototype.pk]}, follow=True
    )
    assert "Retrying 1 prototype(s)" in response.content.decode()
    prototype.refresh_from_db()
    assert prototype.state == Prototype.State.GENERATING and prototype.last_error == "retried by sam"


def test_view_only_staff_cannot_retry_or_cancel(client, fake_v0):
    viewer = staff_client(client, "view_prototype")
    make_lead()
    prototype = Prototype.objects.get()
    page = viewer.get("/admin/prototypes/prototype/").content.decode()
    assert "Cancel selected" not in page
    viewer.post("/admin/prototypes/prototype/", {"action": "cancel", "_selected_action": [prototype.pk]})
    assert Prototype.objects.get().state == Prototype.State.QUEUED


def test_recover_command_reschedules_stuck_prototypes_once_with_a_progress_line(fake_v0):
    make_lead()
    Job.objects.filter(kind="prototypes.check").update(status=Job.Status.DEAD)
    since = (timezone.now() - timedelta(days=1)).date().isoformat()
    out = io.StringIO()
    call_command("prototypes_recover", "--since", since, "--dry-run", stdout=out)
    assert "1/1 prototypes" in out.getvalue() and "would reschedule 1" in out.getvalue()
    assert not Job.objects.filter(kind="prototypes.check", status=Job.Status.PENDING).exists()
    out = io.StringIO()
    call_command("prototypes_recover", "--since", since, stdout=out)
    assert "rescheduled 1" in out.getvalue()
    out = io.StringIO()
    call_command("prototypes_recover", "--since", since, stdout=out)
    assert "0 stuck prototype(s) found" in out.getvalue()
    with pytest.raises(CommandError):
        call_command("prototypes_recover", "--since", "yesterday")
