"""Sales staff in the lead admin, and the operators' backfill commands."""

import io
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

import jobs
from foundation.staff_groups import SALES
from jobs.models import Job
from leadgen.models import Lead
from leadgen.rules import Classification
from leadgen.services import lead_create

pytestmark = pytest.mark.django_db


def make_lead(email="ada@analytical.example", message="Please call us about automation.", category="lead"):
    return lead_create(
        fields={"first_name": "Ada", "last_name": "Lovelace", "email": email, "company": "Acme", "message": message},
        client_ip="203.0.113.7",
        classification=Classification(category, 0.9, "Judged by hand.", "llm"),
    )


@pytest.fixture
def sales_client(client):
    user = User.objects.create_user("sam", password="pw", is_staff=True)
    user.groups.add(Group.objects.get_or_create(name=SALES)[0])
    # Transactional tests elsewhere may have emptied the group's permissions: grant what the migration grants.
    user.groups.get().permissions.add(
        *Permission.objects.filter(content_type__app_label="leadgen", codename__in=["view_lead", "change_lead"])
    )
    user.user_permissions.add(Permission.objects.get(codename="view_all_stores"))  # web leads are of no store
    client.force_login(user)
    return client


def test_the_lead_list_filters_and_searches(sales_client):
    make_lead()
    make_lead(email="spam@mailinator.com", category="spam")
    page = sales_client.get("/admin/leadgen/lead/", {"status__exact": "spam"}).content.decode()
    assert "spam@mailinator.com" in page and "ada@analytical.example" not in page
    page = sales_client.get("/admin/leadgen/lead/", {"q": "lovelace"}).content.decode()
    assert "ada@analytical.example" in page
    for filter_title in ("By status", "By category", "By service type", "By pipedrive state", "By created at"):
        assert filter_title in page


def test_the_lead_page_shows_classification_and_jobs(sales_client):
    lead = make_lead()
    page = sales_client.get(f"/admin/leadgen/lead/{lead.pk}/change/").content.decode()
    assert "Judged by hand." in page
    for kind in ("leadgen.pipedrive_sync", "leadgen.lead_alert", "leadgen.confirmation_email"):
        assert kind in page


def test_staff_cannot_delete_leads(sales_client):
    lead = make_lead()
    assert sales_client.post(f"/admin/leadgen/lead/{lead.pk}/delete/", {"post": "yes"}).status_code == 403
    assert Lead.objects.filter(pk=lead.pk).exists()


def test_reclassify_action_turns_a_misjudged_lead_into_spam(sales_client):
    lead = make_lead(email="bot@mailinator.com")  # judged a lead by hand, the rules say disposable: spam
    response = sales_client.post(
        "/admin/leadgen/lead/", {"action": "reclassify", "_selected_action": [lead.pk]}, follow=True
    )
    assert "1 changed status" in response.content.decode()
    lead.refresh_from_db()
    assert (lead.status, lead.classified_by) == ("spam", "rules")


def test_resync_action_replays_a_failed_pipedrive_sync(sales_client, settings):
    settings.PIPEDRIVE_API_TOKEN = "pd-token"
    settings.PIPEDRIVE_API_URL = "http://127.0.0.1:9"  # nothing listens: the sync fails
    lead = make_lead()
    sync = Job.objects.get(kind="leadgen.pipedrive_sync")
    Job.objects.filter(pk=sync.pk).update(max_attempts=1)
    jobs.run_now(sync.pk)
    sync.refresh_from_db()
    lead.refresh_from_db()
    assert sync.status == "dead" and lead.pipedrive_state == "failed"

    sales_client.post("/admin/leadgen/lead/", {"action": "resync_pipedrive", "_selected_action": [lead.pk]})
    sync.refresh_from_db()
    lead.refresh_from_db()
    assert sync.status == "pending" and lead.pipedrive_state == "pending"
    assert Job.objects.filter(kind="leadgen.pipedrive_sync").count() == 1, "the same job, replayed"


def test_leads_export_as_csv(sales_client):
    make_lead()
    form = sales_client.get("/admin/leadgen/lead/export/")
    assert form.status_code == 200
    fields = {f"leadresource_{name}": "on" for name in ("id", "email", "status", "category")}
    response = sales_client.post("/admin/leadgen/lead/export/", {"format": "0", "resource": "0", **fields})
    assert response["Content-Type"].startswith("text/csv")
    assert "ada@analytical.example" in response.content.decode()


def test_reclassify_leads_command_is_idempotent_and_honours_dry_run():
    lead = make_lead(email="bot@mailinator.com")
    old = make_lead(email="old@mailinator.com")
    Lead.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=30))
    since = (timezone.now() - timedelta(days=1)).date().isoformat()

    out = io.StringIO()
    call_command("reclassify_leads", "--since", since, "--dry-run", stdout=out)
    assert "1 would change status" in out.getvalue()
    assert Lead.objects.get(pk=lead.pk).status == "lead"

    call_command("reclassify_leads", "--since", since, stdout=io.StringIO())
    assert Lead.objects.get(pk=lead.pk).status == "spam"
    assert Lead.objects.get(pk=old.pk).status == "lead", "older than --since: untouched"
    out = io.StringIO()
    call_command("reclassify_leads", "--since", since, stdout=out)
    assert "0 changed status" in out.getvalue()


def test_resync_pipedrive_command_queues_only_unsynced_leads():
    synced, failed = make_lead(), make_lead(email="grace@compilers.example")
    Lead.objects.filter(pk=synced.pk).update(pipedrive_state="synced")
    Lead.objects.filter(pk=failed.pk).update(pipedrive_state="failed")
    Job.objects.filter(kind="leadgen.pipedrive_sync", key__endswith=f":{failed.pk}").update(status="dead")
    since = timezone.now().date().isoformat()

    out = io.StringIO()
    call_command("resync_pipedrive", "--since", since, "--dry-run", stdout=out)
    assert "1 of 1 unsynced leads would be queued" in out.getvalue()
    assert Job.objects.get(key=f"leadgen.pipedrive_sync:{failed.pk}").status == "dead"

    call_command("resync_pipedrive", "--since", since, stdout=io.StringIO())
    assert Job.objects.get(key=f"leadgen.pipedrive_sync:{failed.pk}").status == "pending"
    assert Lead.objects.get(pk=synced.pk).pipedrive_state == "synced"
    out = io.StringIO()
    call_command("resync_pipedrive", "--since", since, stdout=out)
    assert "0 of 1 unsynced leads queued" in out.getvalue(), "already pending: nothing more to do"


def test_backfill_commands_reject_a_bad_date():
    with pytest.raises(CommandError, match="YYYY-MM-DD"):
        call_command("reclassify_leads", "--since", "last week")
