"""Several jobs of one transaction: one INSERT, one after-commit callback, one run message; on PostgreSQL."""

import base64
import json
from datetime import timedelta

import pytest
import redis
from django.conf import settings
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

import jobs
from jobs import JobSpec
from jobs.dispatch import run_messages
from jobs.models import Job
from jobs.runtime import jobs_sweep
from jobs.services import redispatch_after
from jobs.tasks import run_jobs

pytestmark = pytest.mark.django_db


def spec(runs, key, **kwargs):
    return JobSpec("tests.record", {"runs": runs.key}, key=key, **kwargs)


def broker():
    return redis.Redis.from_url(settings.CELERY_BROKER_URL)


def newest_message():
    """The last message published to the default queue: (task name, args)."""
    raw = json.loads(broker().lindex("celery", 0))
    args, _kwargs, _embed = json.loads(base64.b64decode(raw["body"]))
    return raw["headers"]["task"], args


def test_new_jobs_are_one_insert_and_one_callback(django_capture_on_commit_callbacks, runs):
    later = timezone.now() + timedelta(minutes=10)
    with django_capture_on_commit_callbacks() as callbacks, CaptureQueriesContext(connection) as queries:
        first, second, delayed = jobs.enqueue_many(
            [spec(runs, "many:1"), spec(runs, "many:2", max_attempts=3), spec(runs, "many:3", run_after=later)]
        )
    assert [q["sql"].split()[0] for q in queries.captured_queries] == ["INSERT"]
    assert len(callbacks) == 1
    assert [job.key for job in (first, second, delayed)] == ["many:1", "many:2", "many:3"]
    stored = {job.key: job for job in Job.objects.filter(key__startswith="many:")}
    assert {job.key: job.pk for job in (first, second, delayed)} == {key: job.pk for key, job in stored.items()}
    assert stored["many:1"].dispatched_at is not None and stored["many:2"].dispatched_at is not None
    assert stored["many:3"].dispatched_at is None, "a delayed job waits for the sweep"
    assert stored["many:3"].run_after == later
    assert (stored["many:1"].max_attempts, stored["many:2"].max_attempts) == (settings.JOBS_DEFAULT_MAX_ATTEMPTS, 3)
    assert stored["many:1"].payload == {"runs": runs.key}
    assert not first._state.adding, "returned jobs are saved instances"


def test_the_due_jobs_go_in_one_run_message_in_order(django_capture_on_commit_callbacks, runs):
    queued = broker().llen("celery")
    with django_capture_on_commit_callbacks(execute=True):
        first, second, _later = jobs.enqueue_many(
            [
                spec(runs, "msg:1"),
                spec(runs, "msg:2"),
                spec(runs, "msg:3", run_after=timezone.now() + timedelta(hours=1)),
            ]
        )
    run_messages.flush()  # what the publisher thread does JOBS_DISPATCH_LINGER_MS later
    assert broker().llen("celery") == queued + 1
    assert newest_message() == ("jobs.run_many", [[first.pk, second.pk]])

    with django_capture_on_commit_callbacks(execute=True):
        [single] = jobs.enqueue_many([spec(runs, "msg:4")])
    run_messages.flush()
    assert newest_message() == ("jobs.run", [single.pk]), "one job goes as a plain jobs.run"


def test_the_batch_task_runs_each_job_once_and_in_order(runs):
    first, second = jobs.enqueue_many([spec(runs, "batch:1"), spec(runs, "batch:2")])
    run_jobs([first.pk, second.pk])
    run_jobs([first.pk, second.pk])  # a message delivered twice
    assert runs.counts() == {"batch:1": 1, "batch:2": 1}
    assert set(Job.objects.filter(pk__in=[first.pk, second.pk]).values_list("status", flat=True)) == {"succeeded"}


def test_a_failing_job_does_not_stop_the_rest_of_its_batch(runs):
    failing, fine = jobs.enqueue_many(
        [JobSpec("tests.fail_times", {"runs": runs.key, "failures": 1}, key="mixed:1"), spec(runs, "mixed:2")]
    )
    run_jobs([failing.pk, fine.pk])
    failing.refresh_from_db()
    assert failing.status == Job.Status.PENDING and failing.attempts == 1, "retried later"
    assert runs.counts() == {"mixed:2": 1}


def test_existing_keys_return_the_existing_jobs_unchanged_and_not_sent_again(django_capture_on_commit_callbacks, runs):
    existing = jobs.enqueue("tests.record", {"runs": runs.key, "n": 1}, key="seen:1")
    with django_capture_on_commit_callbacks() as callbacks:
        again, new, repeated = jobs.enqueue_many(
            [
                JobSpec("tests.record", {"runs": runs.key, "n": 2}, key="seen:1"),
                spec(runs, "seen:2"),
                JobSpec("tests.record", {"runs": runs.key, "n": 3}, key="seen:2"),  # twice in one call
            ]
        )
    assert again.pk == existing.pk and again.payload["n"] == 1
    assert repeated is new and new.payload == {"runs": runs.key}
    assert Job.objects.filter(key__startswith="seen:").count() == 2
    assert len(callbacks) == 1

    with django_capture_on_commit_callbacks() as callbacks, CaptureQueriesContext(connection) as queries:
        assert [job.pk for job in jobs.enqueue_many([spec(runs, "seen:1"), spec(runs, "seen:2")])] == [
            existing.pk,
            new.pk,
        ]
    assert callbacks == [], "nothing new: nothing sent"
    assert [q["sql"].split()[0] for q in queries.captured_queries] == ["INSERT", "SELECT"]


def test_an_unknown_kind_refuses_the_whole_call():
    with pytest.raises(LookupError):
        jobs.enqueue_many([JobSpec("tests.record", {}, key="fine"), JobSpec("nobody.handles.this", {}, key="x")])
    assert not Job.objects.filter(key__in=["fine", "x"]).exists()


def test_the_jobs_are_part_of_the_callers_transaction(runs):
    with pytest.raises(RuntimeError), transaction.atomic():
        jobs.enqueue_many([spec(runs, "rolled-back:1"), spec(runs, "rolled-back:2")])
        raise RuntimeError("the business write failed")
    assert not Job.objects.filter(key__startswith="rolled-back:").exists()


def test_without_dispatch_nothing_is_sent_and_the_sweep_waits_before_sending(django_capture_on_commit_callbacks, runs):
    with django_capture_on_commit_callbacks() as callbacks:
        [job] = jobs.enqueue_many([spec(runs, "self-run")], dispatch=False)
    assert callbacks == []
    with django_capture_on_commit_callbacks():
        assert jobs_sweep()["dispatched"] == 0, "the caller runs it; the sweep waits for JOBS_REDISPATCH_SECONDS"
    Job.objects.filter(pk=job.pk).update(dispatched_at=timezone.now() - redispatch_after() - timedelta(seconds=1))
    with django_capture_on_commit_callbacks():
        assert jobs_sweep()["dispatched"] == 1, "the caller died: the sweep sends it"


def test_enqueue_without_dispatch_still_works(django_capture_on_commit_callbacks, runs):
    with django_capture_on_commit_callbacks() as callbacks:
        job = jobs.enqueue("tests.record", {"runs": runs.key}, key="self-run-single", dispatch=False)
    assert callbacks == [] and job.dispatched_at is not None


def test_an_empty_list_writes_nothing(django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as callbacks, CaptureQueriesContext(connection) as queries:
        assert jobs.enqueue_many([]) == []
    assert callbacks == [] and queries.captured_queries == []


def row_spec(runs, key, **payload):
    return JobSpec("tests.record", {"runs": runs.key, **payload}, key=key)


def test_a_row_and_its_jobs_are_one_statement_naming_the_row_by_its_id(django_capture_on_commit_callbacks, runs):
    from django.contrib.auth.models import User

    existing = jobs.enqueue(  # an existing key returns its job, unchanged, as with enqueue_many
        "tests.record", {"runs": runs.key}, key="with-row:existing"
    )
    row = User(username="with-row")
    with django_capture_on_commit_callbacks() as callbacks, CaptureQueriesContext(connection) as queries:
        written = jobs.enqueue_many_with_row(row, lambda: [
            row_spec(runs, f"with-row:{jobs.ROW_ID}:a", user_id=jobs.ROW_ID),
            row_spec(runs, "with-row:existing", user_id=jobs.ROW_ID),
            row_spec(runs, f"with-row:{jobs.ROW_ID}:b"),
        ])  # fmt: skip
    assert [q["sql"].split()[0] for q in queries.captured_queries] == ["WITH", "SELECT"], "then the existing job"
    assert User.objects.filter(pk=row.pk, username="with-row").exists() and not row._state.adding
    assert [job.key for job in written] == [f"with-row:{row.pk}:a", "with-row:existing", f"with-row:{row.pk}:b"]
    stored = {job.key: job for job in Job.objects.filter(key__startswith="with-row:")}
    assert {job.key: job.pk for job in written} == {key: job.pk for key, job in stored.items()}
    assert stored[f"with-row:{row.pk}:a"].payload == {"runs": runs.key, "user_id": row.pk} == written[0].payload
    assert stored["with-row:existing"].payload == existing.payload == {"runs": runs.key}
    assert len(callbacks) == 1


def test_a_row_without_jobs_is_written_alone_and_a_bad_spec_writes_nothing(runs):
    from django.contrib.auth.models import User

    row = User(username="alone")
    assert jobs.enqueue_many_with_row(row, lambda: []) == []
    assert User.objects.filter(pk=row.pk).exists()
    with pytest.raises(LookupError):
        jobs.enqueue_many_with_row(User(username="never"), lambda: [JobSpec("no.such.kind", {}, key="never")])
    assert not User.objects.filter(username="never").exists()
