"""Durable side effects. Everything that leaves the request path goes through `enqueue`."""

from jobs.errors import PermanentError, SkipJob, TransientError
from jobs.registry import handler

__all__ = ["PermanentError", "SkipJob", "TransientError", "enqueue", "handler"]


def enqueue(kind, payload, *, key, run_after=None, max_attempts=None):
    """Record a job in the caller's transaction; it runs after commit. See services.job_enqueue."""
    from jobs.services import job_enqueue

    return job_enqueue(kind=kind, payload=payload, key=key, run_after=run_after, max_attempts=max_attempts)
