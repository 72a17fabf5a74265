"""One run message of several jobs (runtime.jobs_run): each job's finish and the next one's claim are one
statement, and each job is still claimed only when its turn comes; on PostgreSQL."""

import uuid
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

import jobs
from jobs import JobSpec, runtime
from jobs.kinds import DEAD_ALERT_KIND
from jobs.models import Job, JobAttempt
from tests.jobs.handlers import runs_store

pytestmark = pytest.mark.django_db


def enqueue(kind, key, **payload):
    return jobs.enqueue(kind, payload, key=key, dispatch=False)


def test_a_message_runs_its_jobs_in_order_with_one_statement_each_plus_the_first_claim(runs):
    made = jobs.enqueue_many([JobSpec("tests.record", {"runs": runs.key}, key=f"one:{n}") for n in range(5)])
    with CaptureQueriesContext(connection) as ctx:
        runtime.jobs_run(job_ids=[job.pk for job in made])
    assert len(ctx.captured_queries) == 5 + 1
    assert runs.counts() == {f"one:{n}": 1 for n in range(5)}
    for job in Job.objects.filter(pk__in=[job.pk for job in made]):
        assert (job.status, job.attempts, job.lease_expires_at) == (Job.Status.SUCCEEDED, 1, None)
        [attempt] = job.attempt_log.all()
        assert attempt.outcome == JobAttempt.Outcome.SUCCEEDED and attempt.started_at == job.started_at


def test_the_next_job_is_claimed_only_after_the_one_before_finished(runs):
    seen = f"test:seen:{uuid.uuid4()}"
    keys = ["turn:a", "turn:b", "turn:c"]
    made = [
        enqueue("tests.record_neighbours", key, runs=runs.key, seen=seen, neighbours=[k for k in keys if k != key])
        for key in keys
    ]
    runtime.jobs_run(job_ids=[job.pk for job in made])
    assert runs_store().hgetall(seen) == {
        "turn:a saw turn:b": "pending",
        "turn:a saw turn:c": "pending",
        "turn:b saw turn:a": "succeeded",
        "turn:b saw turn:c": "pending",
        "turn:c saw turn:a": "succeeded",
        "turn:c saw turn:b": "succeeded",
    }
    runs_store().delete(seen)


def test_every_outcome_in_one_message(runs):
    dead = enqueue("tests.permanent", "mixed:dead")
    retry = enqueue("tests.fail_times", "mixed:retry", runs=runs.key, failures=1)
    later = jobs.enqueue(
        "tests.record", {"runs": runs.key}, key="mixed:later", run_after=timezone.now() + timedelta(hours=1)
    )
    fine = enqueue("tests.record", "mixed:fine", runs=runs.key)
    kept = enqueue("tests.keep_less", "mixed:kept", runs=runs.key, email="someone@example.com")
    runtime.jobs_run(job_ids=[dead.pk, retry.pk, later.pk, fine.pk, fine.pk, kept.pk])

    dead.refresh_from_db()
    assert dead.status == Job.Status.DEAD and dead.finished_at is not None
    assert [a.outcome for a in dead.attempt_log.all()] == [JobAttempt.Outcome.FAILED]
    assert Job.objects.filter(kind=DEAD_ALERT_KIND, payload__job_id=dead.pk).count() == 1, "alerted once"
    retry.refresh_from_db()
    assert (retry.status, retry.attempts, retry.dispatched_at) == (Job.Status.PENDING, 1, None)
    assert retry.run_after > timezone.now() and retry.finished_at is None, "due again after its backoff"
    later.refresh_from_db()
    assert (later.status, later.attempts) == (Job.Status.PENDING, 0), "not due: left alone"
    assert runs.counts() == {"mixed:fine": 1, "mixed:kept": 1}, "a job listed twice runs once"
    kept.refresh_from_db()
    assert kept.status == Job.Status.SUCCEEDED and kept.payload == {"kept": True}


def test_a_lost_lease_refuses_the_finish_but_not_the_next_claim(runs):
    lost = enqueue("tests.lose_lease", "lease:lost")
    after = enqueue("tests.record", "lease:after", runs=runs.key)
    runtime.jobs_run(job_ids=[lost.pk, after.pk])
    lost.refresh_from_db()
    assert (lost.status, lost.attempts) == (Job.Status.RUNNING, 2), "the other attempt's row is untouched"
    assert not lost.attempt_log.exists()
    assert runs.counts() == {"lease:after": 1}
    assert Job.objects.get(pk=after.pk).status == Job.Status.SUCCEEDED


def test_a_job_claimed_by_the_finish_before_it_keeps_its_kinds_concurrency_limit(runs):
    names = {name: f"test:{name}:{uuid.uuid4()}" for name in ("running", "peak_max")}
    busy = [enqueue("tests.limited", f"limit:busy:{n}", runs=runs.key, **names) for n in range(2)]
    assert all(runtime.job_claim(job_id=job.pk) for job in busy), "the kind's two slots are taken"
    first = enqueue("tests.record", "limit:first", runs=runs.key)
    waiting = enqueue("tests.limited", "limit:waiting", runs=runs.key, **names)
    runtime.jobs_run(job_ids=[first.pk, waiting.pk])
    waiting.refresh_from_db()
    assert (waiting.status, waiting.attempts) == (Job.Status.PENDING, 0)
    assert waiting.run_after > timezone.now() and waiting.dispatched_at is None, "the sweep sends it again"
    assert runs.counts() == {"limit:first": 1}
