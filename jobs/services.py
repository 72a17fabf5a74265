"""The job layer's writes that callers make: enqueue, replay, discard, the test job.

The worker side (claim, run, finish, dead-letter, sweep) is jobs/runtime.py.
Enqueue is one INSERT … ON CONFLICT per call, whatever the number of jobs, and
one after-commit callback: it runs inside every request that has a side
effect (bench/jobs and bench/intake measure it). A new row and its jobs can
be one statement (job_enqueue_many_with_row: a new lead and its fan-out).
"""

import functools
import json
import uuid
from collections.abc import Callable, Iterable
from dataclasses import replace
from datetime import timedelta

import structlog
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connection, connections, transaction
from django.db.models import F
from django.utils import timezone

from foundation.db import insert_layout, insert_many_on_conflict, insert_values, insert_with
from jobs.dispatch import dispatch_committed, send_run_messages
from jobs.kinds import PING_KIND
from jobs.models import Job, JobStep
from jobs.registry import get_handler, is_batched
from jobs.spec import ROW_ID, JobSpec

logger = structlog.get_logger(__name__)
_KEY = connection.ops.quote_name(Job._meta.get_field("key").column)
_ON_KEY_CONFLICT = f"ON CONFLICT ({_KEY}) DO NOTHING"
_RETURNING = f"{connection.ops.quote_name(Job._meta.pk.column)}, {_KEY}"


def redispatch_after() -> timedelta:
    """A run message not acted on within this long (lost publish, broker restart) is sent again by the sweep."""
    return timedelta(seconds=settings.JOBS_REDISPATCH_SECONDS)


def job_enqueue(*, kind, payload, key, run_after=None, max_attempts=None, dispatch=True, store_id=None) -> Job:
    """Record a side effect in the caller's transaction; an existing key returns its job.

    Due jobs are sent to the workers once the transaction commits; later ones
    are picked up by the sweep when their time comes. `dispatch=False` is for a
    caller that runs the job itself right after commit (`jobs.run_now`): no run
    message is sent, and the sweep sends one if the job is still pending after
    JOBS_REDISPATCH_SECONDS (the caller died).
    """
    spec = JobSpec(
        kind=kind, payload=payload, key=key, run_after=run_after, max_attempts=max_attempts, store_id=store_id
    )
    return job_enqueue_many(specs=[spec], dispatch=dispatch)[0]


def job_enqueue_many(*, specs: Iterable[JobSpec], dispatch=True) -> list[Job]:
    """`job_enqueue` for several jobs at once: one INSERT, one after-commit callback, one run message.

    Same guarantees, job by job: every kind must have a handler (checked
    before anything is written); a key that exists already (or comes twice in
    `specs`) returns the existing job, which is neither changed nor sent
    again; due jobs are dispatched after commit, later ones are left to the
    sweep; `dispatch=False` sends nothing (see job_enqueue). Returns one job
    per spec, in order.

    One INSERT … ON CONFLICT (key) DO NOTHING RETURNING id, key writes the new
    rows; only when some keys existed does a SELECT fetch those.
    """
    specs = list(specs)
    candidates = _job_candidates(specs)
    rows = insert_many_on_conflict(list(candidates.values()), on_conflict=_ON_KEY_CONFLICT, returning=_RETURNING)
    return _jobs_written(specs, candidates, rows, dispatch=dispatch)


def job_enqueue_many_with_row(*, row, specs: Callable[[], Iterable[JobSpec]], dispatch=True) -> list[Job]:
    """`job_enqueue_many`, with `row` (an unsaved model instance with an automatic primary key) inserted in the
    same statement: the row and its jobs in one round trip to PostgreSQL (a data-modifying CTE), in the caller's
    transaction. Same guarantees as job_enqueue_many; sets the row's primary key.

    `specs()` is called once the row's values are set (its auto_now fields included), before the statement:
    the row's id is not known yet, so the specs name it ROW_ID, in their keys and as payload values, and the
    statement writes the id there.
    """
    values = insert_values(row)
    specs = list(specs())
    candidates = _job_candidates(specs)
    if not candidates:
        insert_with(row, values)
        return []
    fields, head, row_placeholders = _job_insert_layout()
    db = connections[DEFAULT_DB_ALIAS]  # not the proxy: its lookup per field costs more than the field
    rows = insert_with(
        row, values,
        then=head + ", ".join([row_placeholders] * len(candidates)) + f" {_ON_KEY_CONFLICT} RETURNING {_RETURNING}",
        params=[field.get_db_prep_save(field.pre_save(job, add=True), db) for job in candidates.values()
                for field in fields],
    )  # fmt: skip
    row_id = str(row.pk)
    for job in candidates.values():
        job.key = job.key.replace(ROW_ID, row_id)
        job.payload = json.loads(json.dumps(job.payload).replace(f'"{ROW_ID}"', row_id))
    candidates = {job.key: job for job in candidates.values()}
    return _jobs_written([replace(spec, key=spec.key.replace(ROW_ID, row_id)) for spec in specs], candidates, rows,
                         dispatch=dispatch)  # fmt: skip


def _job_candidates(specs: list[JobSpec]) -> dict[str, Job]:
    """key → the unsaved Job of its first spec, as successive job_enqueue calls would keep it."""
    for spec in specs:
        if get_handler(spec.kind) is None:
            raise LookupError(f"no handler registered for job kind {spec.kind!r}")
    now = timezone.now()
    candidates = {}
    for spec in specs:
        if spec.key in candidates:
            continue
        run_after = spec.run_after or now
        candidates[spec.key] = Job(
            kind=spec.kind,
            key=spec.key,
            payload=spec.payload,
            store_id=spec.store_id,
            run_after=run_after,
            max_attempts=spec.max_attempts or settings.JOBS_DEFAULT_MAX_ATTEMPTS,
            dispatched_at=now if run_after <= now else None,
            created_at=now,
        )
    return candidates


def _jobs_written(specs, candidates: dict[str, Job], rows, *, dispatch: bool) -> list[Job]:
    """The jobs of `specs` once the INSERT returned (id, key) of the rows it wrote; the after-commit dispatch."""
    jobs_by_key = {}
    for pk, key in rows:
        job = candidates[key]
        job.pk = pk
        job._state.adding = False
        job._state.db = connection.alias
        jobs_by_key[key] = job
    new_keys = set(jobs_by_key)
    if existing_keys := [key for key in candidates if key not in new_keys]:
        jobs_by_key.update((job.key, job) for job in Job.objects.filter(key__in=existing_keys))
        if missing := [key for key in existing_keys if key not in jobs_by_key]:
            raise Job.DoesNotExist(f"jobs with keys {missing} conflicted on insert but cannot be read")
    # In the order of `specs`: a batch's worker runs them in that order.
    due = [job for key, job in candidates.items() if key in new_keys and job.dispatched_at is not None]
    if due and dispatch:
        batched = [job.pk for job in due if is_batched(job.kind)]
        unbatched = [job.pk for job in due if not is_batched(job.kind)]
        transaction.on_commit(lambda: dispatch_committed(batched, unbatched))
    return [jobs_by_key[spec.key] for spec in specs]


@functools.cache
def _job_insert_layout() -> tuple[list, str, str]:
    """foundation.db.insert_layout's for a Job row, with its key and payload written with the new row's id."""
    fields, head, _ = insert_layout(Job, auto_pk=True)
    placeholders = []
    for field in fields:
        if field.name == "key":  # ROW_ID → the id, as text
            placeholders.append(f"replace(%s, '{ROW_ID}', (SELECT pk FROM new_row)::text)")
        elif field.name == "payload":  # "ROW_ID" (a JSON string) → the id (a JSON number)
            placeholders.append(f"replace(%s::text, '\"{ROW_ID}\"', (SELECT pk FROM new_row)::text)::jsonb")
        else:
            placeholders.append("%s")
    return fields, head, "(" + ", ".join(placeholders) + ")"


def jobs_replay(*, job_ids, actor: str) -> int:
    """Run dead or skipped jobs again now, with JOBS_REPLAY_ATTEMPTS more attempts.

    Attempt numbers keep counting, so the history of the earlier run stays intact.
    The UPDATE is fenced on the status (it is the same conditional statement
    that picks the jobs), so a job another replay already set pending, which a
    worker may be running by now, is left alone: two replays at once never put
    a running job back to pending. A run message for a job this call did not
    replay is harmless: claiming is conditional too.
    """
    now = timezone.now()
    replayable = [Job.Status.DEAD, Job.Status.SKIPPED]
    with transaction.atomic():
        ids = list(Job.objects.filter(pk__in=job_ids, status__in=replayable).values_list("pk", flat=True))
        count = Job.objects.filter(pk__in=ids, status__in=replayable).update(
            status=Job.Status.PENDING,
            max_attempts=F("attempts") + settings.JOBS_REPLAY_ATTEMPTS,
            run_after=now,
            dispatched_at=now,
            finished_at=None,
            last_error=f"replayed by {actor}",
            updated_at=now,
        )
        transaction.on_commit(lambda: send_run_messages(ids))
    logger.info("jobs_replayed", count=count, actor=actor)
    return count


def jobs_discard(*, job_ids, actor: str) -> int:
    """Stop pending or dead jobs for good; the row stays as the record."""
    now = timezone.now()
    count = Job.objects.filter(pk__in=job_ids, status__in=[Job.Status.PENDING, Job.Status.DEAD]).update(
        status=Job.Status.SKIPPED,
        last_error=f"discarded by {actor}",
        finished_at=now,
        updated_at=now,
    )
    logger.info("jobs_discarded", count=count, actor=actor)
    return count


def job_send_test(*, actor: str) -> Job:
    """A no-op job that proves web → database → broker → worker works end to end."""
    return job_enqueue(kind=PING_KIND, payload={"sent_by": actor}, key=f"{PING_KIND}:{uuid.uuid4()}")


def jobs_subject_erase(*, job_ids) -> dict[str, int]:
    """Delete these jobs with their attempts and steps, whatever their status: a pending one never runs.
    A worker running one finds its row gone when it finishes, as when its lease is lost. {model label: rows}"""
    with transaction.atomic():
        keys = list(Job.objects.filter(pk__in=job_ids).values_list("key", flat=True))
        counts = dict(JobStep.objects.filter(job_key__in=keys).delete()[1])
        counts.update(Job.objects.filter(pk__in=job_ids).delete()[1])
    logger.info("jobs_subject_erased", count=counts.get(Job._meta.label, 0))
    return counts
