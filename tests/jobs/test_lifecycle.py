"""A job's life: enqueue, run, retry, dead-letter, alert, replay — on PostgreSQL."""

from datetime import timedelta

import pytest
from django.core import mail
from django.db import transaction
from django.utils import timezone

import jobs
from jobs import runtime, services
from jobs.models import Job, JobAttempt

pytestmark = pytest.mark.django_db


def make_due(job):
    Job.objects.filter(pk=job.pk).update(run_after=timezone.now())


def test_enqueue_with_an_existing_key_returns_the_first_job(runs):
    first = jobs.enqueue("tests.record", {"runs": runs.key, "n": 1}, key="order:1")
    again = jobs.enqueue("tests.record", {"runs": runs.key, "n": 2}, key="order:1")
    assert again.pk == first.pk
    assert Job.objects.filter(key="order:1").count() == 1
    assert Job.objects.get(key="order:1").payload["n"] == 1


def test_enqueue_is_part_of_the_callers_transaction(runs):
    with pytest.raises(RuntimeError), transaction.atomic():
        jobs.enqueue("tests.record", {"runs": runs.key}, key="rolled-back")
        raise RuntimeError("the business write failed")
    assert not Job.objects.filter(key="rolled-back").exists()


def test_enqueue_sends_the_run_message_only_after_commit(django_capture_on_commit_callbacks, runs):
    with django_capture_on_commit_callbacks() as callbacks:
        jobs.enqueue("tests.record", {"runs": runs.key}, key="due-now")
        jobs.enqueue(
            "tests.record", {"runs": runs.key}, key="later", run_after=timezone.now() + timedelta(minutes=10)
        )
    assert len(callbacks) == 1  # the delayed job waits for the sweep
    assert Job.objects.get(key="due-now").dispatched_at is not None
    assert Job.objects.get(key="later").dispatched_at is None


def test_enqueue_refuses_an_unknown_kind():
    with pytest.raises(LookupError):
        jobs.enqueue("nobody.handles.this", {}, key="x")


def test_successful_run_records_one_attempt(runs):
    job = jobs.enqueue("tests.record", {"runs": runs.key}, key="ok")
    runtime.job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == Job.Status.SUCCEEDED
    assert job.finished_at is not None and job.lease_expires_at is None
    assert runs.counts() == {"ok": 1}
    [attempt] = job.attempt_log.all()
    assert attempt.outcome == JobAttempt.Outcome.SUCCEEDED and attempt.duration_ms is not None


def test_a_finished_job_is_not_run_again(runs):
    job = jobs.enqueue("tests.record", {"runs": runs.key}, key="once")
    runtime.job_run(job_id=job.pk)
    assert runtime.job_run(job_id=job.pk) is None
    assert runs.counts() == {"once": 1}


def test_transient_failure_backs_off_then_succeeds(runs, settings):
    settings.JOBS_BACKOFF_BASE_SECONDS = 40
    job = jobs.enqueue("tests.fail_times", {"runs": runs.key, "failures": 2}, key="flaky")

    before = timezone.now()
    runtime.job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == Job.Status.PENDING and job.attempts == 1
    assert before + timedelta(seconds=20) <= job.run_after <= timezone.now() + timedelta(seconds=40)
    assert "upstream busy" in job.last_error
    assert runtime.job_run(job_id=job.pk) is None, "not due yet"

    make_due(job)
    runtime.job_run(job_id=job.pk)
    job.refresh_from_db()
    second_delay = job.run_after - timezone.now()
    assert timedelta(seconds=39) <= second_delay <= timedelta(seconds=80), "the delay doubles"

    make_due(job)
    runtime.job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == Job.Status.SUCCEEDED
    assert [a.outcome for a in job.attempt_log.all()] == ["retry", "retry", "succeeded"]
    assert runs.counts() == {"flaky": 1}


def test_retry_after_from_the_upstream_is_honoured(runs):
    job = jobs.enqueue("tests.fail_times", {"runs": runs.key, "failures": 1, "retry_after": 120}, key="slow-down")
    runtime.job_run(job_id=job.pk)
    job.refresh_from_db()
    wait = (job.run_after - timezone.now()).total_seconds()
    assert 115 <= wait <= 120


def test_permanent_error_dead_letters_at_once_and_alerts_once(settings):
    settings.OPS_ALERT_EMAILS = ["ops@example.com"]
    job = jobs.enqueue("tests.permanent", {}, key="bad-request", max_attempts=5)
    runtime.job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == Job.Status.DEAD and job.attempts == 1
    assert "upstream said 400" in job.last_error

    [alert] = Job.objects.filter(kind="jobs.dead_alert")
    runtime.job_run(job_id=alert.pk)
    runtime.jobs_sweep()
    runtime.job_run(job_id=alert.pk)
    assert len(mail.outbox) == 1
    message = mail.outbox[0]
    assert message.to == ["ops@example.com"]
    assert "tests.permanent" in message.subject
    assert f"/admin/jobs/job/{job.pk}/change/" in message.body


def test_last_attempt_dead_letters():
    job = jobs.enqueue("tests.fail_times", {"failures": 99}, key="hopeless", max_attempts=2)
    runtime.job_run(job_id=job.pk)
    make_due(job)
    runtime.job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == Job.Status.DEAD
    assert job.last_error.startswith("gave up after 2 attempts")
    assert Job.objects.filter(kind="jobs.dead_alert").count() == 1


def test_alert_without_recipients_is_skipped_not_failed(settings):
    settings.OPS_ALERT_EMAILS = []
    job = jobs.enqueue("tests.permanent", {}, key="nobody-listens")
    runtime.job_run(job_id=job.pk)
    alert = Job.objects.get(kind="jobs.dead_alert")
    runtime.job_run(job_id=alert.pk)
    alert.refresh_from_db()
    assert alert.status == Job.Status.SKIPPED
    assert "not configured" in alert.last_error
    assert mail.outbox == []


def test_replay_gives_a_dead_job_fresh_attempts(runs, settings):
    settings.JOBS_REPLAY_ATTEMPTS = 3
    job = jobs.enqueue("tests.fail_times", {"runs": runs.key, "failures": 2}, key="replayed", max_attempts=1)
    runtime.job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == Job.Status.DEAD

    assert services.jobs_replay(job_ids=[job.pk], actor="ops") == 1
    job.refresh_from_db()
    assert job.status == Job.Status.PENDING and (job.attempts, job.max_attempts) == (1, 4)
    runtime.job_run(job_id=job.pk)
    make_due(job)
    runtime.job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == Job.Status.SUCCEEDED
    assert runs.counts() == {"replayed": 1}
    assert [a.number for a in job.attempt_log.all()] == [1, 2, 3], "the dead run's history is kept"


def test_discard_stops_a_pending_job(runs):
    job = jobs.enqueue("tests.record", {"runs": runs.key}, key="unwanted")
    assert services.jobs_discard(job_ids=[job.pk], actor="ops") == 1
    assert runtime.job_run(job_id=job.pk) is None
    job.refresh_from_db()
    assert job.status == Job.Status.SKIPPED and "discarded by ops" in job.last_error
    assert runs.counts() == {}


def test_sweep_reclaims_an_expired_lease(runs):
    job = jobs.enqueue("tests.record", {"runs": runs.key}, key="abandoned")
    assert runtime.job_claim(job_id=job.pk) is not None
    Job.objects.filter(pk=job.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))

    assert runtime.jobs_sweep()["reclaimed"] == 1
    job.refresh_from_db()
    assert job.status == Job.Status.PENDING
    assert job.attempt_log.get().outcome == JobAttempt.Outcome.LOST
    runtime.job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == Job.Status.SUCCEEDED and job.attempts == 2


def test_a_job_that_keeps_killing_its_worker_ends_dead():
    job = jobs.enqueue("tests.record", {}, key="poison", max_attempts=1)
    runtime.job_claim(job_id=job.pk)
    Job.objects.filter(pk=job.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    runtime.jobs_sweep()
    job.refresh_from_db()
    assert job.status == Job.Status.DEAD
    assert Job.objects.filter(kind="jobs.dead_alert").exists()


def test_a_worker_that_lost_its_lease_cannot_overwrite_the_new_attempt(runs):
    job = jobs.enqueue("tests.record", {"runs": runs.key}, key="fenced")
    stale = runtime.job_claim(job_id=job.pk)
    Job.objects.filter(pk=job.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    runtime.jobs_sweep()
    runtime.job_run(job_id=job.pk)  # the second attempt succeeds

    assert not runtime.job_finish(
        stale, status=Job.Status.DEAD, outcome=JobAttempt.Outcome.FAILED, error="late", duration_ms=1
    )
    job.refresh_from_db()
    assert job.status == Job.Status.SUCCEEDED


def test_sweep_dispatches_due_jobs_nobody_sent(django_capture_on_commit_callbacks, runs):
    job = jobs.enqueue("tests.record", {"runs": runs.key}, key="delayed", run_after=timezone.now() + timedelta(hours=1))
    with django_capture_on_commit_callbacks():
        assert runtime.jobs_sweep()["dispatched"] == 0
    make_due(job)
    with django_capture_on_commit_callbacks() as callbacks:
        assert runtime.jobs_sweep()["dispatched"] == 1
    assert len(callbacks) == 1
    with django_capture_on_commit_callbacks():
        assert runtime.jobs_sweep()["dispatched"] == 0, "not sent twice within the redispatch window"


def test_readyz_reports_dead_jobs(client, settings):
    job = jobs.enqueue("tests.permanent", {}, key="dead-for-readyz")
    runtime.job_run(job_id=job.pk)
    runtime.jobs_sweep()  # as beat does every JOBS_SWEEP_SECONDS
    settings.HEALTH_CHECK_TOKEN = "health-token"
    settings.READYZ_CACHE_SECONDS = 0
    response = client.get("/readyz", HTTP_AUTHORIZATION="Bearer health-token")
    assert response.status_code == 200
    body = response.json()
    assert body["details"]["jobs_dead"] == 1
    assert body["checks"] == {"Database": "OK", "Cache": "OK", "Broker": "OK", "McpServer": "OK", "Sweep": "OK"}
    assert client.get("/healthz").status_code == 200
