"""The two no-ops the job benchmark compares, importable by the worker (`--include bench.jobs.handlers`).

Both do the same work: one Redis round trip that counts the run, and, on the
run that reaches the target, records the wall-clock time. So the only
difference between the two paths is what the job layer adds around a task.
"""

import os
import time

import redis
from celery import shared_task

from jobs import handler

JOB_KIND = "bench.noop"
CELERY_TASK = "bench.celery_noop"

CELERY_COUNTER = "bench:celery:done"
JOBS_COUNTER = "bench:jobs:done"
TARGET = "bench:target"  # how many runs the current phase waits for

_client = None


def store() -> redis.Redis:
    """One client per process; redis-py resets its pool when it finds itself in a forked child."""
    global _client
    if _client is None:
        _client = redis.Redis.from_url(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
    return _client


def end_key(counter: str) -> str:
    return f"{counter}:end"


def count_run(counter: str) -> None:
    pipe = store().pipeline(transaction=False)
    pipe.incr(counter)
    pipe.get(TARGET)
    done, target = pipe.execute()
    if target is not None and done == int(target):
        store().set(end_key(counter), repr(time.time()))


@shared_task(name=CELERY_TASK)
def celery_noop():
    count_run(CELERY_COUNTER)


@handler(JOB_KIND)
def job_noop(job):
    count_run(JOBS_COUNTER)
