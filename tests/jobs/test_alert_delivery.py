"""The dead-job alert email, sent through anymail's Mailgun backend to a local fake Mailgun."""

import json
import logging

import pytest
from werkzeug import Request, Response

import jobs
from jobs import runtime
from jobs.models import Job
from tests.conftest import free_port

pytestmark = pytest.mark.django_db

MAILGUN_QUEUED = {"id": "<20261130.1234.5678@mg.example.com>", "message": "Queued. Thank you."}


@pytest.fixture
def mailgun(httpserver, settings):
    # pytest-django swaps in the locmem backend for every test: put Mailgun's back.
    settings.EMAIL_BACKEND = "anymail.backends.mailgun.EmailBackend"
    settings.ANYMAIL = {
        "MAILGUN_API_KEY": "key-test",
        "MAILGUN_SENDER_DOMAIN": "mg.example.com",
        "MAILGUN_API_URL": httpserver.url_for("/v3"),
    }
    settings.OPS_ALERT_EMAILS = ["ops@example.com", "oncall@example.com"]
    return httpserver


def dead_job_alert():
    job = jobs.enqueue("tests.permanent", {}, key="will-die")
    runtime.job_run(job_id=job.pk)
    return job, Job.objects.get(kind="jobs.dead_alert")


def test_alert_is_posted_to_mailgun_messages(mailgun):
    received = []

    def accept(request: Request):
        received.append(request.form.to_dict(flat=False))
        return Response(json.dumps(MAILGUN_QUEUED), content_type="application/json")

    mailgun.expect_request("/v3/mg.example.com/messages", method="POST").respond_with_handler(accept)
    job, alert = dead_job_alert()
    runtime.job_run(job_id=alert.pk)

    alert.refresh_from_db()
    assert alert.status == Job.Status.SUCCEEDED
    [form] = received
    assert sorted(form["to"]) == ["oncall@example.com", "ops@example.com"]
    assert "tests.permanent" in form["subject"][0]
    assert f"/admin/jobs/job/{job.pk}/change/" in form["text"][0]


def logged(caplog, event):
    return [r.msg for r in caplog.records if isinstance(r.msg, dict) and r.msg.get("event") == event]


def test_mailgun_outage_is_retried_then_delivered_once(mailgun, caplog):
    mailgun.expect_ordered_request("/v3/mg.example.com/messages").respond_with_data("busy", status=503)
    # The retry first asks whether Mailgun accepted the first attempt's Message-ID after all.
    mailgun.expect_ordered_request("/v3/mg.example.com/events").respond_with_json({"items": [], "paging": {}})
    mailgun.expect_ordered_request("/v3/mg.example.com/messages").respond_with_json(MAILGUN_QUEUED)
    _, alert = dead_job_alert()

    with caplog.at_level(logging.INFO):
        runtime.job_run(job_id=alert.pk)
    alert.refresh_from_db()
    assert alert.status == Job.Status.PENDING and "HTTP 503" in alert.last_error
    [failed_call] = logged(caplog, "http_request")
    assert failed_call["service"] == "email" and failed_call["status"] == 503
    assert (failed_call["method"], failed_call["path"]) == ("POST", "/v3/mg.example.com/messages")

    Job.objects.filter(pk=alert.pk).update(run_after=alert.created_at)
    runtime.job_run(job_id=alert.pk)
    alert.refresh_from_db()
    assert alert.status == Job.Status.SUCCEEDED
    mailgun.check_assertions()
    assert len(mailgun.log) == 3
    first, _, second = (request for request, _ in mailgun.log)
    assert first.form["h:Message-Id"] == second.form["h:Message-Id"], "one message, sent once"


def test_mailgun_rejection_dead_letters_without_quoting_the_response(mailgun):
    mailgun.expect_request("/v3/mg.example.com/messages").respond_with_json(
        {"message": "'to' parameter is not a valid address: ops@example.com"}, status=400
    )
    _, alert = dead_job_alert()
    runtime.job_run(job_id=alert.pk)
    alert.refresh_from_db()
    assert alert.status == Job.Status.DEAD
    assert "HTTP 400" in alert.last_error
    assert "ops@example.com" not in alert.last_error
    assert not Job.objects.filter(kind="jobs.dead_alert").exclude(pk=alert.pk).exists(), "no alert about an alert"


def test_an_unreachable_mailgun_is_retried_and_logged_with_host_and_path(settings, caplog):
    settings.EMAIL_BACKEND = "anymail.backends.mailgun.EmailBackend"
    settings.ANYMAIL = {
        "MAILGUN_API_KEY": "key-test",
        "MAILGUN_SENDER_DOMAIN": "mg.example.com",
        "MAILGUN_API_URL": f"http://127.0.0.1:{free_port()}/v3",  # nothing listens there
    }
    settings.OPS_ALERT_EMAILS = ["ops@example.com"]
    _, alert = dead_job_alert()

    with caplog.at_level(logging.INFO):
        runtime.job_run(job_id=alert.pk)
    alert.refresh_from_db()
    assert alert.status == Job.Status.PENDING
    [failed_call] = logged(caplog, "http_connection_error")
    assert (failed_call["host"], failed_call["path"]) == ("127.0.0.1", "/v3/mg.example.com/messages")
