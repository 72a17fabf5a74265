"""A kind registered with `concurrency=N` never runs more than N jobs at once, across workers."""

import threading
import uuid
from datetime import timedelta

import pytest
from django.db import close_old_connections
from django.utils import timezone

import jobs
from jobs import runtime
from jobs.models import Job
from tests.jobs.handlers import runs_store


@pytest.mark.django_db(transaction=True)
def test_claims_beyond_the_limit_wait_and_every_job_still_runs_once(runs):
    names = {name: f"test:{name}:{uuid.uuid4()}" for name in ("running", "peak_max")}
    created = [
        jobs.enqueue("tests.limited", {"runs": runs.key, **names}, key=f"limited:{i}:{uuid.uuid4()}", dispatch=False)
        for i in range(6)
    ]
    barrier = threading.Barrier(len(created))

    def worker(job_id):
        barrier.wait()
        try:
            runtime.job_run(job_id=job_id)
        finally:
            close_old_connections()

    threads = [threading.Thread(target=worker, args=(job.pk,)) for job in created]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    deferred = Job.objects.filter(kind="tests.limited", status=Job.Status.PENDING)
    assert deferred.count() >= 3, "six at once, two allowed: the others were put back"
    for job in deferred:
        assert job.attempts == 0, "a refused claim is not an attempt"
        assert job.run_after > timezone.now() and job.dispatched_at is None, "due again soon, for the sweep"
    while pending := list(Job.objects.filter(kind="tests.limited", status=Job.Status.PENDING)):
        Job.objects.filter(pk__in=[j.pk for j in pending]).update(run_after=timezone.now() - timedelta(seconds=1))
        for job in pending:
            runtime.job_run(job_id=job.pk)
    assert set(runs.counts().values()) == {1} and len(runs.counts()) == 6
    assert int(runs_store().get(names["peak_max"])) <= 2


@pytest.mark.django_db
def test_an_expired_lease_does_not_count_against_the_limit(runs):
    names = {name: f"test:{name}:{uuid.uuid4()}" for name in ("running", "peak_max")}
    first, second, third = (
        jobs.enqueue("tests.limited", {"runs": runs.key, **names}, key=f"limited:{uuid.uuid4()}", dispatch=False)
        for _ in range(3)
    )
    assert runtime.job_claim(job_id=first.pk) and runtime.job_claim(job_id=second.pk)
    assert runtime.job_claim(job_id=third.pk) is None, "two are running"
    Job.objects.filter(pk=first.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))  # its worker died
    Job.objects.filter(pk=third.pk).update(run_after=timezone.now())
    assert runtime.job_claim(job_id=third.pk) is not None


def test_the_limit_must_be_positive():
    with pytest.raises(ValueError):
        jobs.handler("tests.never", concurrency=0)
