"""Long jobs keep their lease while they run; the job table keeps only what it still needs."""

import threading
import time
from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.db import connection
from django.utils import timezone

import jobs
from jobs import runtime
from jobs.heartbeat import lease_heartbeat
from jobs.models import Job, JobAttempt, JobStep
from standins.lead_emails import lead_message
from tests.tracking.support import run_jobs
from tracking import services as tracking_services
from tracking.parsing import parse_lead_email


@pytest.mark.django_db(transaction=True)
def test_a_handler_that_runs_three_times_its_lease_runs_once(settings, runs):
    settings.JOBS_LEASE_SECONDS = 2
    settings.JOBS_HEARTBEAT_SECONDS = 0.25
    job = jobs.enqueue("tests.sleep", {"seconds": 6.2, "runs": runs.key}, key="long-job", dispatch=False)

    def work():
        try:
            runtime.job_run(job_id=job.pk)
        finally:
            connection.close()  # this thread's own

    worker = threading.Thread(target=work)
    worker.start()
    # Meanwhile the sweep runs and other workers keep trying the job, as they would in production.
    while worker.is_alive():
        runtime.jobs_sweep()
        jobs.run_now(job.pk)
        time.sleep(0.1)
    worker.join()
    job.refresh_from_db()
    assert runs.counts() == {"long-job": 1}
    assert (job.status, job.attempts) == ("succeeded", 1)
    assert list(JobAttempt.objects.filter(job=job).values_list("outcome", flat=True)) == ["succeeded"]


@pytest.mark.django_db(transaction=True)
def test_a_worker_that_lost_its_lease_stops_extending_it_and_its_finish_is_refused(settings):
    settings.JOBS_HEARTBEAT_SECONDS = 0
    job = jobs.enqueue("tests.record", {}, key="stolen-lease", dispatch=False)
    claimed = runtime.job_claim(job_id=job.pk)
    running = lease_heartbeat.register(claimed)
    try:
        lease_heartbeat.beat()
        assert not running.lost
        # The sweep reclaims it (the worker looked dead) and another worker claims attempt 2.
        Job.objects.filter(pk=job.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
        runtime.jobs_sweep()
        assert runtime.job_claim(job_id=job.pk).attempts == 2
        lease_before = Job.objects.get(pk=job.pk).lease_expires_at
        lease_heartbeat.beat()
        assert running.lost, "the first worker's heartbeat is fenced out"
        assert Job.objects.get(pk=job.pk).lease_expires_at == lease_before
    finally:
        lease_heartbeat.unregister(running)
    finished = runtime.job_finish(
        claimed, status=Job.Status.SUCCEEDED, outcome=JobAttempt.Outcome.SUCCEEDED, error="", duration_ms=1
    )
    assert finished is False
    assert Job.objects.get(pk=job.pk).status == "running", "attempt 2 still owns the job"


def test_time_limits_sit_above_the_lease_and_budgets_below_it():
    from config.celery import app

    lease = django_settings.JOBS_LEASE_SECONDS
    assert app.conf.task_soft_time_limit > 3 * lease
    assert app.conf.task_time_limit > app.conf.task_soft_time_limit
    for budget in (
        django_settings.IMAP_POLL_TIME_BUDGET_SECONDS,
        django_settings.TRACKING_SYNC_TIME_BUDGET_SECONDS,
        django_settings.JOBS_TIME_BUDGET_SECONDS,
    ):
        assert budget < lease
    assert lease > django_settings.JOBS_HEARTBEAT_SECONDS


def _finished_job(key, status, *, age_days):
    when = timezone.now() - timedelta(days=age_days)
    job = Job.objects.create(
        kind="tests.record", key=key, status=status, attempts=1, run_after=when, created_at=when, finished_at=when
    )
    JobAttempt.objects.create(job=job, number=1, started_at=when, finished_at=when, outcome="succeeded")
    JobStep.objects.create(job_key=key, step="email")
    return job


@pytest.mark.django_db
def test_retention_deletes_old_finished_jobs_in_batches_that_requeue_themselves(settings, caplog):
    settings.JOBS_RETENTION_BATCH = 2
    for n in range(5):
        _finished_job(f"old-succeeded-{n}", "succeeded", age_days=15)
    _finished_job("old-skipped", "skipped", age_days=20)
    kept = {
        _finished_job("old-dead", "dead", age_days=40).key,
        _finished_job("recent-succeeded", "succeeded", age_days=13).key,
        jobs.enqueue("tests.record", {}, key="old-pending", run_after=timezone.now() - timedelta(days=30)).key,
    }
    from jobs.tasks import retention_start

    retention_start()
    parts = 0
    while run_jobs("jobs.retention"):
        parts += 1
    assert parts == 4, "6 old jobs in batches of 2: three full batches, then an empty one"
    remaining = set(Job.objects.exclude(kind="jobs.retention").values_list("key", flat=True))
    assert remaining == kept
    assert set(JobAttempt.objects.values_list("job__key", flat=True)) <= kept | set(
        Job.objects.filter(kind="jobs.retention").values_list("key", flat=True)
    )
    assert set(JobStep.objects.values_list("job_key", flat=True)) == {"old-dead", "recent-succeeded"}


@pytest.mark.django_db
def test_a_parked_email_lead_keeps_no_parsed_message_once_its_lead_is_written():
    raw = lead_message(first="Jane", last="Doe", phone="(415) 555-0132")
    parsed = parse_lead_email(raw, received_at=timezone.now())
    source = tracking_services.MessageSource("INBOX", 7, 42)
    parked = tracking_services.email_lead_park(parsed=parsed, source=source)
    assert "raw_body" in parked.payload["lead"]
    assert run_jobs(tracking_services.LEAD_RETRY_KIND) == 1
    parked.refresh_from_db()
    assert parked.status == "succeeded"
    assert "lead" not in parked.payload and "Jane" not in str(parked.payload)
    assert parked.payload["source"] == source.key and parked.payload["lead_id"]
