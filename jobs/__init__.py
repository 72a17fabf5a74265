"""Durable side effects. Everything that leaves the request path goes through `enqueue` (or `enqueue_many`)."""

from dataclasses import dataclass
from datetime import datetime

from jobs.errors import PermanentError, SkipJob, TransientError
from jobs.registry import handler

__all__ = ["JobSpec", "PermanentError", "SkipJob", "TransientError", "enqueue", "enqueue_many", "handler"]


@dataclass(frozen=True)
class JobSpec:
    """One job for `enqueue_many`: the arguments of `enqueue` less `dispatch`."""

    kind: str
    payload: dict
    key: str
    run_after: datetime | None = None
    max_attempts: int | None = None


def enqueue(kind, payload, *, key, run_after=None, max_attempts=None, dispatch=True):
    """Record a job in the caller's transaction; it runs after commit. See services.job_enqueue."""
    from jobs.services import job_enqueue

    return job_enqueue(
        kind=kind, payload=payload, key=key, run_after=run_after, max_attempts=max_attempts, dispatch=dispatch
    )


def enqueue_many(specs, *, dispatch=True):
    """Record several jobs (`JobSpec`s) in the caller's transaction with one INSERT; the due ones go to
    the workers in one run message after commit. One job per spec, in order. See services.job_enqueue_many."""
    from jobs.services import job_enqueue_many

    return job_enqueue_many(specs=specs, dispatch=dispatch)
