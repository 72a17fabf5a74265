"""Real Celery worker processes against the real PostgreSQL and Redis broker.

Several workers drain the same jobs (each run message sent twice, and the
sweep running too): every job runs exactly once. A worker killed with SIGKILL
mid-job loses nothing: beat's sweep reclaims the job when its lease expires
and another worker completes it.
"""

import os
import signal
import subprocess
import sys
import time
import uuid

import pytest
from django.db import transaction
from django_celery_beat.models import IntervalSchedule, PeriodicTask

import jobs
from jobs.models import Job, JobAttempt
from jobs.tasks import run_job
from tests.conftest import subprocess_env
from tests.jobs.handlers import runs_store

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.usefixtures("empty_broker")]

CELERY = [sys.executable, "-m", "celery", "-A", "config"]


def start_worker(env, *, pool="prefork", concurrency=2):
    name = f"w{uuid.uuid4().hex[:8]}@%h"
    return subprocess.Popen(
        [*CELERY, "worker", "--include", "tests.jobs.handlers", "-P", pool, "-c", str(concurrency),
         "-n", name, "--without-heartbeat", "--without-gossip", "--without-mingle", "--loglevel", "WARNING"],
        env=env, start_new_session=True,
    )  # fmt: skip


def start_beat(env, schedule_dir):
    return subprocess.Popen(
        [*CELERY, "beat", "--scheduler", "django_celery_beat.schedulers:DatabaseScheduler",
         "--pidfile=", "-s", str(schedule_dir / "beat"), "--loglevel", "WARNING"],
        env=env, start_new_session=True,
    )  # fmt: skip


def stop(*processes):
    for process in processes:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def wait_until(condition, *, timeout, interval=0.2, message="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {message}")


def sweep_every_second():
    every_second, _ = IntervalSchedule.objects.get_or_create(every=1, period=IntervalSchedule.SECONDS)
    PeriodicTask.objects.update_or_create(
        name="jobs: sweep due and abandoned jobs", defaults={"task": "jobs.sweep", "interval": every_second}
    )


def test_several_workers_drain_the_same_jobs_each_exactly_once(runs, tmp_path):
    sweep_every_second()
    with transaction.atomic():
        for n in range(1000):
            jobs.enqueue("tests.record", {"runs": runs.key}, key=f"drain:{n}")
    # Every job gets a second run message on top of the one sent at commit.
    for job_id in Job.objects.filter(key__startswith="drain:").values_list("pk", flat=True):
        run_job.delay(job_id)

    env = subprocess_env()
    processes = [start_worker(env) for _ in range(3)] + [start_beat(env, tmp_path)]
    try:
        wait_until(
            lambda: not Job.objects.filter(key__startswith="drain:").exclude(status="succeeded").exists(),
            timeout=180,
            interval=1,
            message="all 1,000 jobs to succeed",
        )
    finally:
        stop(*processes)

    counts = runs.counts()
    assert len(counts) == 1000
    assert set(counts.values()) == {1}, "a job ran more than once"
    assert JobAttempt.objects.filter(job__key__startswith="drain:").count() == 1000


def test_a_job_whose_worker_is_killed_is_reclaimed_and_completes(runs, tmp_path):
    sweep_every_second()
    started_flag = f"test:started:{uuid.uuid4()}"
    job = jobs.enqueue("tests.hang_first", {"runs": runs.key, "started_flag": started_flag}, key="killed-mid-job")

    env = subprocess_env(JOBS_LEASE_SECONDS=3)
    doomed = start_worker(env, pool="solo", concurrency=1)
    beat = start_beat(env, tmp_path)
    rescuer = None
    try:
        wait_until(lambda: runs_store().get(started_flag), timeout=60, message="the first attempt to start")
        os.killpg(doomed.pid, signal.SIGKILL)
        doomed.wait(timeout=10)
        job.refresh_from_db()
        assert job.status == Job.Status.RUNNING, "the dead worker still holds the lease"

        rescuer = start_worker(env)
        wait_until(
            lambda: Job.objects.get(pk=job.pk).status == Job.Status.SUCCEEDED,
            timeout=90,
            message="the job to be reclaimed and completed",
        )
    finally:
        stop(*[p for p in (doomed, beat, rescuer) if p])

    job.refresh_from_db()
    assert [a.outcome for a in job.attempt_log.all()] == ["lost", "succeeded"]
    assert runs.counts() == {"killed-mid-job": 1}


def test_worker_processes_started_as_the_procfile_starts_them_keep_their_connection():
    """DATABASE_POOL=false (the Procfile's worker line): each process keeps one connection from task to
    task, no pool check-out or new connection per task."""
    backends = f"test:backends:{uuid.uuid4()}"
    with transaction.atomic():
        for n in range(40):
            jobs.enqueue("tests.record_backend", {"backends": backends}, key=f"backend:{n}")
    worker = start_worker(subprocess_env(DATABASE_POOL="false"), concurrency=2)
    try:
        wait_until(
            lambda: not Job.objects.filter(key__startswith="backend:").exclude(status="succeeded").exists(),
            timeout=90,
            message="all 40 jobs to succeed",
        )
    finally:
        stop(worker)
    pids = runs_store().hgetall(backends)
    runs_store().delete(backends)
    assert len(pids) == 40
    assert len(set(pids.values())) <= 2, "a worker process opened more than one connection"
