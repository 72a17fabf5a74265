"""Job kinds used by the tests, importable by worker subprocesses (`celery worker --include`).

Each records its runs in Redis, outside our own bookkeeping, so a test can
count how often a handler really ran.
"""

import os
import time

import redis

from jobs import PermanentError, TransientError, handler, handler_of_many, keep_payload_on_success


def runs_store():
    return redis.Redis.from_url(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"), decode_responses=True)


def record_run(job):
    runs_store().hincrby(job.payload.get("runs", "test:runs"), job.key, 1)


@handler("tests.record")
def record(job):
    record_run(job)


@handler("tests.fail_times")
def fail_times(job):
    """Transient failure for the first `failures` attempts, then success."""
    if job.attempts <= job.payload.get("failures", 0):
        raise TransientError("upstream busy", retry_after=job.payload.get("retry_after"))
    record_run(job)


@handler("tests.permanent")
def permanent(job):
    raise PermanentError("upstream said 400: bad request")


@handler("tests.hang_first")
def hang_first(job):
    """The first attempt signals it started, then hangs until killed; later attempts succeed."""
    if job.attempts == 1:
        runs_store().set(job.payload["started_flag"], "1")
        time.sleep(600)
    record_run(job)


@handler("tests.record_backend")
def record_backend(job):
    """Records which PostgreSQL backend (so which connection) ran the job."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        runs_store().hset(job.payload["backends"], job.key, cursor.fetchone()[0])


@handler("tests.record_alone", batched=False)
def record_alone(job):
    """A long job meant to run beside others of its kind: each gets its own run message."""
    record_run(job)


@handler("tests.sleep")
def sleep(job):
    """Runs for `seconds` (a long job), then records its run."""
    time.sleep(job.payload["seconds"])
    record_run(job)


@handler("tests.limited", concurrency=2)
def limited(job):
    """Counts how many of its kind run at the same moment (the highest count is kept)."""
    store = runs_store()
    running = store.incr(job.payload["running"])
    if running > int(store.get(job.payload["peak_max"]) or 0):
        store.set(job.payload["peak_max"], running)
    time.sleep(0.3)
    store.decr(job.payload["running"])
    record_run(job)


@handler("tests.enqueue_follow_up", batched=False)
def enqueue_follow_up(job):
    """Queues a `tests.record` job from inside the worker, so its run message waits in this process."""
    import jobs

    jobs.enqueue("tests.record", {"runs": job.payload["runs"]}, key=f"{job.key}:follow-up")


@handler("tests.record_neighbours")
def record_neighbours(job):
    """Records the status that the jobs keyed in its payload's `neighbours` have while this one runs."""
    from jobs.models import Job

    statuses = dict(Job.objects.filter(key__in=job.payload["neighbours"]).values_list("key", "status"))
    store = runs_store()
    for neighbour in job.payload["neighbours"]:
        store.hset(job.payload["seen"], f"{job.key} saw {neighbour}", statuses[neighbour])
    record_run(job)


@handler("tests.lose_lease")
def lose_lease(job):
    """Another attempt takes the row while this one runs (its lease expired and the sweep reclaimed it)."""
    from django.db.models import F

    from jobs.models import Job

    Job.objects.filter(pk=job.pk).update(attempts=F("attempts") + 1)


@handler("tests.keep_less")
def keep_less(job):
    """Succeeds, keeping a smaller payload than it was given."""
    keep_payload_on_success(job, {"kept": True})
    record_run(job)


@handler("tests.together")
def together_alone(job):
    """One job of the kind, alone: fails for good when its payload says `permanent`, else records its run."""
    if job.payload.get("permanent"):
        raise PermanentError("this one needs its own outcome")
    record_run(job)
    runs_store().rpush(f"{job.payload['runs']}:calls", "alone")


@handler_of_many("tests.together")
def together(jobs):
    """Several jobs of the kind in one call: fails as a whole when one says `fail_together`, leaves those that say
    `permanent` to the handler, and takes away the lease of those that say `lose_lease` (another worker's claim)."""
    from django.db.models import F

    from jobs.models import Job

    if any(job.payload.get("fail_together") for job in jobs):
        raise RuntimeError("the batch's transaction failed")
    store = runs_store()
    store.rpush(f"{jobs[0].payload['runs']}:calls", len(jobs))
    for job in jobs:
        if job.payload.get("lose_lease"):
            Job.objects.filter(pk=job.pk).update(attempts=F("attempts") + 1)
        if not job.payload.get("permanent"):
            record_run(job)
    return [job for job in jobs if job.payload.get("permanent")]
