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


# --- kinds with a handler of many: the message's jobs of the kind in one call ----------------------------


def together(runs, n, **payload):
    return JobSpec("tests.together", {"runs": runs.key, **payload}, key=f"together:{n}")


def calls(runs) -> list[str]:
    store = runs_store()
    made = store.lrange(f"{runs.key}:calls", 0, -1)
    store.delete(f"{runs.key}:calls")
    return made


def test_a_message_of_a_kind_with_a_handler_of_many_runs_in_one_call_in_three_statements(runs):
    made = jobs.enqueue_many([together(runs, n) for n in range(5)])
    with CaptureQueriesContext(connection) as ctx:
        runtime.jobs_run(job_ids=[job.pk for job in made])
    assert len(ctx.captured_queries) == 3, "the first one's claim, the others' claim, one finish"
    assert calls(runs) == ["5"]
    assert runs.counts() == {f"together:{n}": 1 for n in range(5)}
    for job in Job.objects.filter(pk__in=[job.pk for job in made]):
        assert (job.status, job.attempts, job.lease_expires_at, job.last_error) == (Job.Status.SUCCEEDED, 1, None, "")
        [attempt] = job.attempt_log.all()
        assert (attempt.number, attempt.outcome, attempt.error) == (1, JobAttempt.Outcome.SUCCEEDED, "")
        assert attempt.started_at == job.started_at and attempt.finished_at == job.finished_at


def test_a_job_the_handler_of_many_leaves_gets_its_own_outcome_in_the_same_attempt(runs):
    made = jobs.enqueue_many([together(runs, 0), together(runs, 1, permanent=True), together(runs, 2)])
    runtime.jobs_run(job_ids=[job.pk for job in made])
    assert calls(runs) == ["3"], "the handler is not called for the others again"
    left = Job.objects.get(pk=made[1].pk)
    assert (left.status, left.attempts) == (Job.Status.DEAD, 1)
    assert [a.outcome for a in left.attempt_log.all()] == [JobAttempt.Outcome.FAILED]
    assert left.last_error == "permanent: this one needs its own outcome"
    assert Job.objects.filter(pk__in=[made[0].pk, made[2].pk], status=Job.Status.SUCCEEDED).count() == 2


def test_when_the_handler_of_many_fails_each_job_runs_alone(runs):
    made = jobs.enqueue_many([together(runs, 0, fail_together=True), together(runs, 1), together(runs, 2)])
    runtime.jobs_run(job_ids=[job.pk for job in made])
    assert calls(runs) == ["alone", "alone", "alone"]
    assert runs.counts() == {f"together:{n}": 1 for n in range(3)}
    for job in Job.objects.filter(pk__in=[job.pk for job in made]):
        assert (job.status, job.attempts, job.attempt_log.count()) == (Job.Status.SUCCEEDED, 1, 1)


def test_a_job_whose_lease_was_taken_meanwhile_is_not_finished_by_the_call_that_lost_it(runs):
    made = jobs.enqueue_many([together(runs, 0), together(runs, 1, lose_lease=True)])
    runtime.jobs_run(job_ids=[job.pk for job in made])
    taken = Job.objects.get(pk=made[1].pk)
    assert (taken.status, taken.attempts, taken.attempt_log.count()) == (Job.Status.RUNNING, 2, 0)
    assert Job.objects.get(pk=made[0].pk).status == Job.Status.SUCCEEDED
    calls(runs)


def test_other_kinds_in_the_message_run_after_one_at_a_time(runs):
    made = jobs.enqueue_many(
        [together(runs, 0), JobSpec("tests.record", {"runs": runs.key}, key="plain:0"), together(runs, 1)]
    )
    made.append(jobs.enqueue("tests.record", {"runs": runs.key}, key="plain:1", dispatch=False))
    runtime.jobs_run(job_ids=[job.pk for job in made])
    assert calls(runs) == ["2"]
    assert runs.counts() == {"together:0": 1, "together:1": 1, "plain:0": 1, "plain:1": 1}
    assert set(Job.objects.filter(pk__in=[job.pk for job in made]).values_list("status", flat=True)) == {"succeeded"}


def test_a_message_that_starts_with_another_kind_runs_one_at_a_time(runs):
    made = jobs.enqueue_many([JobSpec("tests.record", {"runs": runs.key}, key="plain:0"), together(runs, 0)])
    runtime.jobs_run(job_ids=[job.pk for job in made])
    assert calls(runs) == ["alone"]
    assert runs.counts() == {"plain:0": 1, "together:0": 1}


def test_a_kind_that_runs_alone_or_under_a_limit_takes_no_handler_of_many():
    with pytest.raises(ValueError, match="no handler of many"):
        jobs.handler_of_many("tests.limited")(lambda jobs: [])
    with pytest.raises(ValueError, match="no handler of many"):
        jobs.handler_of_many("tests.record_alone")(lambda jobs: [])
    with pytest.raises(ValueError, match="has a handler of many"):
        jobs.handler("tests.together", concurrency=1)(lambda job: None)


def test_a_message_with_one_job_of_the_kind_runs_it_with_its_handler(runs):
    made = jobs.enqueue_many([together(runs, 0), JobSpec("tests.record", {"runs": runs.key}, key="plain:0")])
    with CaptureQueriesContext(connection) as ctx:
        runtime.jobs_run(job_ids=[job.pk for job in made])
    assert len(ctx.captured_queries) == 4, "its claim, the claim of no other, its finish with the next claim, a finish"
    assert calls(runs) == ["alone"]
    assert runs.counts() == {"together:0": 1, "plain:0": 1}
