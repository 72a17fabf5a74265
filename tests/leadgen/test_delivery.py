"""What a lead sets off, delivered to local fakes of Pipedrive, Mailgun (through anymail) and ClickUp."""

import json

import pytest
from django.utils import timezone
from werkzeug import Response

import jobs
from jobs.models import Job
from leadgen.routing import GENERAL_ROUTE, ROUTES
from leadgen.rules import Classification
from leadgen.services import lead_create

pytestmark = pytest.mark.django_db

PIPEDRIVE_LEAD_ID = "adf21080-0e10-11eb-879b-05d71fb426ec"
PIPEDRIVE_CC = "acme+lead-adf21080@pipedrivemail.com"


@pytest.fixture
def upstreams(httpserver, settings):
    settings.PIPEDRIVE_API_TOKEN = "pd-token"
    settings.PIPEDRIVE_API_URL = httpserver.url_for("/pipedrive")
    settings.CLICKUP_API_TOKEN = "pk_clickup"
    settings.CLICKUP_LIST_ID = "901"
    settings.CLICKUP_API_URL = httpserver.url_for("/clickup")
    settings.EMAIL_BACKEND = "anymail.backends.mailgun.EmailBackend"  # pytest-django swapped it for locmem
    settings.ANYMAIL = {
        "MAILGUN_API_KEY": "key-test",
        "MAILGUN_SENDER_DOMAIN": "mg.example.com",
        "MAILGUN_API_URL": httpserver.url_for("/mailgun/v3"),
    }
    return httpserver


def ok(data):
    return {"success": True, "data": data}


def pipedrive_answers(server, *, lead_status=200):
    search_empty = {
        "success": True,
        "data": {"items": []},
        "additional_data": {"pagination": {"more_items_in_collection": False}},
    }
    server.expect_request("/pipedrive/v1/organizations/search").respond_with_json(search_empty)
    server.expect_request("/pipedrive/v1/organizations", method="POST").respond_with_json(ok({"id": 5, "name": "Acme"}))
    server.expect_request("/pipedrive/v1/persons/search").respond_with_json(search_empty)
    server.expect_request("/pipedrive/v1/persons", method="POST").respond_with_json(ok({"id": 7, "name": "Ada"}))
    lead_body = ok({"id": PIPEDRIVE_LEAD_ID, "title": "x", "cc_email": PIPEDRIVE_CC})
    if lead_status != 200:
        lead_body = {"success": False, "error": "Bad request", "error_info": "title is required"}
    server.expect_request("/pipedrive/v1/leads", method="POST").respond_with_json(lead_body, status=lead_status)
    server.expect_request("/pipedrive/v1/notes", method="POST").respond_with_json(ok({"id": 99, "content": "x"}))


def mailgun_and_clickup_answers(server):
    server.expect_request("/mailgun/v3/mg.example.com/messages", method="POST").respond_with_json(
        {"id": "<20261130.1@mg.example.com>", "message": "Queued. Thank you."}
    )
    server.expect_request("/clickup/api/v2/list/901/task", method="POST").respond_with_json(
        {"id": "86a1b2c3", "name": "x", "url": "https://app.clickup.com/t/86a1b2c3"}
    )


def make_lead(service_type="diagnostic", **fields):
    defaults = {
        "first_name": "Ada",
        "last_name": "Lovelace",
        "email": "ada@analytical.example",
        "phone": "+14155550100",
        "company": "Acme",
        "message": "We need <help> with our quoting process.",
        "service_type": service_type,
        "source_page": "https://example.com/services",
        "steps": {"timeline": "this quarter", "tools": ["HubSpot", "Sheets"]},
    }
    defaults.update(fields)
    return lead_create(
        fields=defaults, client_ip="203.0.113.7", classification=Classification("lead", 0.9, "Real need.", "llm")
    )


def run_all_jobs():
    """Run every job of this test as the workers would, ignoring delays; returns how many runs happened."""
    runs = 0
    while job := Job.objects.filter(status=Job.Status.PENDING).order_by("pk").first():
        Job.objects.filter(pk=job.pk).update(run_after=timezone.now())
        jobs.run_now(job.pk)
        runs += 1
    return runs


def requests_to(server, path):
    return [request for request, _ in server.log if request.path == path]


@pytest.mark.parametrize("service_type", [*ROUTES, ""])
def test_each_service_type_gets_its_email_note_and_alert(upstreams, service_type):
    pipedrive_answers(upstreams)
    mailgun_and_clickup_answers(upstreams)
    lead = make_lead(service_type)
    run_all_jobs()
    route = ROUTES.get(service_type, GENERAL_ROUTE)

    lead.refresh_from_db()
    assert (lead.pipedrive_state, lead.pipedrive_lead_id) == ("synced", PIPEDRIVE_LEAD_ID)
    assert (lead.pipedrive_person_id, lead.pipedrive_org_id, lead.pipedrive_cc_email) == (7, 5, PIPEDRIVE_CC)
    assert set(Job.objects.filter(kind__startswith="leadgen.").values_list("status", flat=True)) == {"succeeded"}

    [created] = requests_to(upstreams, "/pipedrive/v1/leads")
    assert created.json == {
        "title": f"{route.label}: Ada Lovelace",
        "origin_id": f"leadgen-lead-{lead.pk}",
        "person_id": 7,
        "organization_id": 5,
    }
    [note] = requests_to(upstreams, "/pipedrive/v1/notes")
    assert note.json["lead_id"] == PIPEDRIVE_LEAD_ID
    heading = route.note_template.replace("_", " ").capitalize()
    assert f"<b>{heading} request</b>" in note.json["content"]
    assert "&lt;help&gt;" in note.json["content"], "visitor text is escaped in Pipedrive's HTML"
    assert "tools: HubSpot, Sheets" in note.json["content"]

    [mail] = requests_to(upstreams, "/mailgun/v3/mg.example.com/messages")
    assert mail.form["subject"] == route.email_subject
    assert mail.form.getlist("to") == ["ada@analytical.example"]
    assert mail.form.getlist("bcc") == [PIPEDRIVE_CC], "Pipedrive logs the email on the lead"
    assert "Hi Ada" in mail.form["text"] and "<p>Hi Ada,</p>" in mail.form["html"]

    [alert] = requests_to(upstreams, "/clickup/api/v2/list/901/task")
    assert alert.headers["Authorization"] == "pk_clickup"
    assert alert.json["name"] == f"{route.alert_heading}: Ada Lovelace"
    body = alert.json["markdown_content"]
    # What the visitor typed is escaped for Markdown (shown as typed, never a link); our own links are not.
    for expected in ("https\\://example\\.com/services", "\\+14155550100", "We need <help>", "https://wa.me/14155550100"):
        assert expected in body
    assert alert.json["priority"] == 1


def test_the_confirmation_email_waits_and_the_alert_does_not(upstreams):
    pipedrive_answers(upstreams)
    mailgun_and_clickup_answers(upstreams)
    lead = make_lead()
    alert = Job.objects.get(kind="leadgen.lead_alert")
    email = Job.objects.get(kind="leadgen.confirmation_email")
    jobs.run_now(alert.pk)
    assert not jobs.run_now(email.pk), "not due for 10 minutes"
    assert requests_to(upstreams, "/clickup/api/v2/list/901/task")
    assert not requests_to(upstreams, "/mailgun/v3/mg.example.com/messages")
    assert (email.run_after - lead.created_at).total_seconds() == 600


def test_an_alert_without_a_phone_has_no_call_script(upstreams):
    mailgun_and_clickup_answers(upstreams)
    lead = make_lead(phone="")
    jobs.run_now(Job.objects.get(kind="leadgen.lead_alert").pk)
    [alert] = requests_to(upstreams, "/clickup/api/v2/list/901/task")
    assert "wa.me" not in alert.json["markdown_content"] and "none given" in alert.json["markdown_content"]
    assert lead.pk


def test_a_vendor_gets_a_polite_decline(upstreams):
    mailgun_and_clickup_answers(upstreams)
    lead_create(
        fields={"first_name": "Sam", "email": "sam@seo.example", "message": "Backlinks!"},
        client_ip=None,
        classification=Classification("vendor", 0.9, "pitch", "rules"),
    )
    run_all_jobs()
    [mail] = requests_to(upstreams, "/mailgun/v3/mg.example.com/messages")
    assert mail.form["subject"] == "Thank you for reaching out"
    assert "not looking for new vendors" in mail.form["text"]
    assert not requests_to(upstreams, "/clickup/api/v2/list/901/task")


def test_a_pipedrive_outage_is_retried_and_the_lead_delivered_once(upstreams):
    search_empty = {"success": True, "data": {"items": []}}
    upstreams.expect_request("/pipedrive/v1/organizations/search").respond_with_json(search_empty)
    upstreams.expect_request("/pipedrive/v1/organizations", method="POST").respond_with_json(ok({"id": 5}))
    upstreams.expect_request("/pipedrive/v1/persons/search").respond_with_json(search_empty)
    upstreams.expect_request("/pipedrive/v1/persons", method="POST").respond_with_json(ok({"id": 7}))
    answers = iter([({"success": False, "error": "Internal"}, 500), (ok({"id": PIPEDRIVE_LEAD_ID}), 200)])

    def outage_then_success(request):
        body, status = next(answers)
        return Response(json.dumps(body), status=status, content_type="application/json")

    upstreams.expect_request("/pipedrive/v1/leads", method="POST").respond_with_handler(outage_then_success)
    # The retry first looks for a lead the failed call may have created (the person's leads).
    upstreams.expect_request("/pipedrive/v1/leads", method="GET").respond_with_json({"success": True, "data": None})
    upstreams.expect_request("/pipedrive/v1/notes", method="POST").respond_with_json(ok({"id": 99}))
    lead = make_lead()
    sync = Job.objects.get(kind="leadgen.pipedrive_sync")

    jobs.run_now(sync.pk)
    sync.refresh_from_db()
    lead.refresh_from_db()
    assert sync.status == "pending" and "HTTP 500" in sync.last_error and sync.run_after > timezone.now()
    assert lead.pipedrive_state == "pending" and lead.pipedrive_person_id == 7

    Job.objects.filter(pk=sync.pk).update(run_after=timezone.now())
    jobs.run_now(sync.pk)
    jobs.run_now(Job.objects.get(kind="leadgen.pipedrive_note").pk)
    lead.refresh_from_db()
    assert lead.pipedrive_state == "synced"
    assert len(requests_to(upstreams, "/pipedrive/v1/persons")) == 1, "the person is not created twice"
    assert len(requests_to(upstreams, "/pipedrive/v1/organizations")) == 1
    assert len(requests_to(upstreams, "/pipedrive/v1/notes")) == 1
    creates = [r for r in requests_to(upstreams, "/pipedrive/v1/leads") if r.method == "POST"]
    assert len(creates) == 2, "one failed, one delivered"


def test_a_pipedrive_rejection_is_dead_lettered_and_visible_to_staff(upstreams, admin_client):
    pipedrive_answers(upstreams, lead_status=400)
    lead = make_lead()
    sync = Job.objects.get(kind="leadgen.pipedrive_sync")
    jobs.run_now(sync.pk)
    sync.refresh_from_db()
    lead.refresh_from_db()
    assert sync.status == "dead" and "HTTP 400" in sync.last_error
    assert lead.pipedrive_state == "failed"
    assert Job.objects.filter(kind="jobs.dead_alert").exists()

    dead_list = admin_client.get("/admin/jobs/job/", {"status__exact": "dead"}).content.decode()
    assert "leadgen.pipedrive_sync" in dead_list
    lead_page = admin_client.get(f"/admin/leadgen/lead/{lead.pk}/change/").content.decode()
    assert f"/admin/jobs/job/{sync.pk}/change/" in lead_page and "dead" in lead_page


def test_unconfigured_integrations_skip_without_failing(settings):
    settings.PIPEDRIVE_API_TOKEN = ""
    settings.CLICKUP_API_TOKEN = ""
    settings.OPS_ALERT_EMAILS = []
    lead = make_lead()
    run_all_jobs()
    statuses = dict(Job.objects.values_list("kind", "status"))
    assert statuses["leadgen.pipedrive_sync"] == "skipped"
    assert statuses["leadgen.lead_alert"] == "skipped"
    assert statuses["leadgen.confirmation_email"] == "succeeded", "email falls back to Django's backend"
    lead.refresh_from_db()
    assert lead.pipedrive_state == "skipped"


def test_the_job_payloads_carry_ids_not_personal_data():
    make_lead()
    for payload in Job.objects.values_list("payload", flat=True):
        assert "ada" not in json.dumps(payload).lower()
