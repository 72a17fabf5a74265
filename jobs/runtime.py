"""The worker side of the job layer: claim, run, finish, dead-letter, sweep, backoff.

Claiming is a conditional UPDATE (status pending → running) that returns the
row, so two workers that receive the same job id never both run it. While the
handler runs, jobs/heartbeat.py extends the lease (fenced on the attempt
number), so a long job is not reclaimed from a live worker. Finishing is fenced
on the attempt number too, so a worker whose lease was taken away cannot
overwrite the outcome of the attempt that replaced it. Claim and finish run
once per job: a job's finish and the claim of the next job of its run message
are one statement (bench/jobs measures them). The jobs of a run message whose
kind has a handler of many (registry.handler_of_many), when the message starts
with one, are claimed in one statement, run by one call and finished in one.
"""

import functools
import random
import sys
import time
from contextlib import nullcontext
from datetime import timedelta

import structlog
from django.conf import settings
from django.core.cache import cache
from django.db import close_old_connections, connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from foundation.db import fetch_models, traceback_scrubbed
from jobs.dispatch import send_run_messages
from jobs.errors import PermanentError, SkipJob, TransientError
from jobs.heartbeat import lease_heartbeat
from jobs.kinds import DEAD_ALERT_KIND
from jobs.models import Job, JobAttempt
from jobs.registry import concurrency_limit, get_handler, get_handler_of_many
from jobs.selectors import LAST_SWEEP_CACHE_KEY
from jobs.services import job_enqueue, redispatch_after

logger = structlog.get_logger(__name__)

SWEEP_BATCH = 500
# A job refused for its kind's concurrency limit is due again this much later (the sweep sends it).
CONCURRENCY_RETRY_AFTER = timedelta(seconds=5)
MAX_ERROR_CHARS = 4000


@functools.cache
def _claim_sql(*, of_kind: bool = False) -> str:
    """pending -> running for one job id (or, `of_kind`, for those of a list of ids that are of one kind),
    returning the rows; the parameters come from _claim_params (the id, or the ids and the kind)."""
    match = "id = ANY(%s) AND kind = %s" if of_kind else "id = %s"
    return (
        f"UPDATE {connection.ops.quote_name(Job._meta.db_table)} SET status = %s, attempts = attempts + 1,"
        " started_at = %s, lease_expires_at = %s, updated_at = %s"
        f" WHERE {match} AND status = %s AND run_after <= %s RETURNING {{columns}}"
    )


def _claim_params(now, *match) -> list:
    dt = connection.ops.adapt_datetimefield_value
    lease_expires = dt(now + timedelta(seconds=settings.JOBS_LEASE_SECONDS))
    return [Job.Status.RUNNING, dt(now), lease_expires, dt(now), *match, Job.Status.PENDING, dt(now)]


def job_claim(*, job_id) -> Job | None:
    """pending -> running in one statement that also returns the row (UPDATE ... RETURNING).

    A kind registered with `concurrency` keeps the claim only within its limit (_job_keep_within_limit).
    """
    claimed = fetch_models(Job, _claim_sql(), _claim_params(timezone.now(), job_id))
    return _within_limit(claimed[0]) if claimed else None


def _within_limit(job: Job) -> Job | None:
    """The just-claimed job, or None when its kind's concurrency limit made it give the claim back."""
    limit = concurrency_limit(job.kind)
    if limit is not None and not _job_keep_within_limit(job, limit=limit):
        return None
    return job


def _job_keep_within_limit(job: Job, *, limit: int) -> bool:
    """A just-claimed job of a kind registered with `concurrency` keeps its claim only within the limit.

    Checked after the claim (so kinds without a limit pay nothing): under a
    per-kind lock (a transaction-scoped advisory lock) the running jobs are
    counted, this one included.
    Over the limit, the claim is undone and the job is due again
    CONCURRENCY_RETRY_AFTER later, for the sweep to send. Running jobs whose
    lease expired do not count: their worker is gone.
    """
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [f"jobs.concurrency:{job.kind}"])
        now = timezone.now()
        running = Job.objects.filter(kind=job.kind, status=Job.Status.RUNNING, lease_expires_at__gt=now).count()
        if running <= limit:
            return True
        Job.objects.filter(pk=job.pk, status=Job.Status.RUNNING, attempts=job.attempts).update(
            status=Job.Status.PENDING,
            attempts=F("attempts") - 1,
            started_at=None,
            lease_expires_at=None,
            run_after=now + CONCURRENCY_RETRY_AFTER,
            dispatched_at=None,
            updated_at=now,
        )
    logger.info("job_claim_deferred", job_id=job.pk, kind=job.kind, running=running - 1, limit=limit)
    return False


def backoff_delay(attempt: int, retry_after: float | None = None) -> float:
    """Seconds before the next attempt: exponential with equal jitter, or what the server asked."""
    ceiling = settings.JOBS_BACKOFF_MAX_SECONDS
    if retry_after is not None:
        return min(max(float(retry_after), 0.0), ceiling)
    delay = min(ceiling, settings.JOBS_BACKOFF_BASE_SECONDS * 2 ** (attempt - 1))
    return random.uniform(delay / 2, delay)


def job_run(*, job_id) -> Job | None:
    """Claim the job and run its handler once; returns None when someone else has it or it is not due."""
    job = job_claim(job_id=job_id)
    if job is None:
        return None
    _job_attempt(job)
    return job


def jobs_run(*, job_ids) -> None:
    """The jobs of one run message, in order, each claimed when its turn comes; when the first one's
    kind has a handler of many and the message holds more of that kind, those first, together
    (_jobs_run_together).

    A job's finish and the claim of the next one are one statement (_job_finish_and_claim),
    so a job costs one round trip to the database beside its handler's own; the claim
    still happens only once the job before has finished, as with a run message each.
    A job that cannot even be run (its claim or finish failed, e.g. the database went
    away) is logged and left to the sweep; the others still run.
    """
    job_ids = list(job_ids)
    claimed, claim_tried = None, False  # the next job, as claimed by the previous finish
    if len(job_ids) > 1:
        try:
            claimed, claim_tried = job_claim(job_id=job_ids[0]), True
        except Exception:
            logger.exception("job_run_failed", job_id=job_ids[0])
            close_old_connections()
            job_ids = job_ids[1:]
        together = claimed is not None and get_handler_of_many(claimed.kind) is not None
        if together and (others := _jobs_claim_of_kind(claimed.kind, job_ids[1:])):
            _jobs_run_together([claimed, *others])
            taken = {job.pk for job in others}
            job_ids = [job_id for job_id in job_ids[1:] if job_id not in taken]
            claimed, claim_tried = None, False
    for position, job_id in enumerate(job_ids):
        next_id = job_ids[position + 1] if position + 1 < len(job_ids) else None
        if next_id == job_id:
            next_id = None  # one statement cannot update a row twice: claimed on its own
        try:
            job = claimed if claim_tried else job_claim(job_id=job_id)
            claimed, claim_tried = None, False
            if job is None:
                continue
            claimed = _job_attempt(job, claim_next=next_id)
            claim_tried = next_id is not None
        except Exception:
            claimed, claim_tried = None, False
            logger.exception("job_run_failed", job_id=job_id)
            close_old_connections()  # a broken connection is not handed to the next job


def _jobs_claim_of_kind(kind: str, job_ids: list[int]) -> list[Job]:
    """Those of `job_ids` that are jobs of `kind`, claimed in one statement, in the order of `job_ids`."""
    try:
        claimed = fetch_models(Job, _claim_sql(of_kind=True), _claim_params(timezone.now(), job_ids, kind))
    except Exception:  # they are claimed one at a time instead
        logger.exception("job_run_failed", job_ids=job_ids)
        close_old_connections()
        return []
    return sorted(claimed, key=lambda job: job_ids.index(job.pk))


def _jobs_run_together(jobs: list[Job]) -> None:
    """Claimed jobs of one kind, run by its handler of many (_jobs_attempt_together), then those it left alone."""
    for job in _jobs_attempt_together(jobs[0].kind, jobs):
        try:
            _job_attempt(job)
        except Exception:
            logger.exception("job_run_failed", job_id=job.pk)
            close_old_connections()


def _jobs_attempt_together(kind: str, jobs: list[Job]) -> list[Job]:
    """One call of the kind's handler of many for these claimed jobs, and the finish of those it did; the jobs
    it left (all of them, when it failed), to run one at a time."""
    started = time.monotonic()
    running = [lease_heartbeat.register(job) for job in jobs]
    try:
        left = list(get_handler_of_many(kind)(jobs))
    except Exception as exc:
        logger.warning("jobs_run_together_failed", kind=kind, count=len(jobs), error=type(exc).__name__)
        return jobs
    finally:
        for each in running:
            lease_heartbeat.unregister(each)
    left_ids = {job.pk for job in left}
    done = [job for job in jobs if job.pk not in left_ids]
    duration_ms = int((time.monotonic() - started) * 1000)
    finished = _jobs_finish_succeeded(done, duration_ms=duration_ms)
    for job in done:
        _finish_log(job, job.pk in finished, status=Job.Status.SUCCEEDED, retry_in=None, duration_ms=duration_ms)
    return left


def _finish_log(job: Job, finished: bool, *, status, retry_in, duration_ms: int) -> None:
    about = {"job_id": job.pk, "kind": job.kind, "attempt": job.attempts, "duration_ms": duration_ms}
    if finished:
        logger.info("job_finished", status=status, retry_in=retry_in, **about)
    else:
        logger.warning("job_lease_lost", **about)


@functools.cache
def _finish_many_sql() -> str:
    """running -> succeeded for (id, attempt number) pairs, fenced as _finish_sql is, with an attempt row each."""
    q = connection.ops.quote_name
    table = q(Job._meta.db_table)
    return (
        f"WITH finished AS (UPDATE {table} SET status = %s, last_error = '', lease_expires_at = NULL,"
        " updated_at = %s, finished_at = %s FROM unnest(%s::bigint[], %s::integer[]) AS done (id, attempts)"
        f" WHERE {table}.id = done.id AND {table}.status = %s AND {table}.attempts = done.attempts"
        f" RETURNING {table}.id, {table}.attempts, {table}.started_at),"
        f" attempt AS (INSERT INTO {q(JobAttempt._meta.db_table)}"
        " (job_id, number, started_at, finished_at, outcome, error, duration_ms)"
        " SELECT id, attempts, started_at, %s, %s, '', %s FROM finished)"
        " SELECT id FROM finished"
    )


def _jobs_finish_succeeded(jobs: list[Job], *, duration_ms: int) -> set[int]:
    """Record these attempts as succeeded in one statement; the ids whose fence held (lease not lost)."""
    if not jobs:
        return set()
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    params = [
        Job.Status.SUCCEEDED, now, now, [job.pk for job in jobs], [job.attempts for job in jobs], Job.Status.RUNNING,
        now, JobAttempt.Outcome.SUCCEEDED, duration_ms,
    ]  # fmt: skip
    with connection.cursor() as cursor:
        cursor.execute(_finish_many_sql(), params)
        return {job_id for (job_id,) in cursor.fetchall()}


def _job_attempt(job: Job, *, claim_next=None) -> Job | None:
    """Run the claimed job's handler once and record the outcome; returns `claim_next`'s job if it claimed it."""
    started = time.monotonic()
    handler = get_handler(job.kind)
    status, outcome, error, retry_in = Job.Status.SUCCEEDED, JobAttempt.Outcome.SUCCEEDED, "", None
    running = lease_heartbeat.register(job)
    try:
        if handler is None:
            raise PermanentError(f"no handler registered for job kind {job.kind!r}")
        handler(job)
    except SkipJob as exc:
        status, outcome, error = Job.Status.SKIPPED, JobAttempt.Outcome.SKIPPED, f"skipped: {exc}"
    except PermanentError as exc:
        status, outcome, error = Job.Status.DEAD, JobAttempt.Outcome.FAILED, f"permanent: {exc}"
    except TransientError as exc:
        status, outcome, error = Job.Status.PENDING, JobAttempt.Outcome.RETRY, f"transient: {exc}"
        retry_in = backoff_delay(job.attempts, exc.retry_after)
    except Exception:
        # A bug or an unexpected failure: retried like a transient error, kept in full for staff.
        status, outcome, error = Job.Status.PENDING, JobAttempt.Outcome.RETRY, traceback_scrubbed(sys.exception())
        retry_in = backoff_delay(job.attempts)
    finally:
        lease_heartbeat.unregister(running)
    if status == Job.Status.PENDING and job.attempts >= job.max_attempts:
        status, outcome = Job.Status.DEAD, JobAttempt.Outcome.FAILED
        error = f"gave up after {job.attempts} attempts; {error}"
    duration_ms = int((time.monotonic() - started) * 1000)
    finished, claimed = _job_finish_and_claim(
        job, status=status, outcome=outcome, error=error, retry_in=retry_in, duration_ms=duration_ms,
        claim_next=claim_next,
    )  # fmt: skip
    _finish_log(job, finished, status=status, retry_in=retry_in, duration_ms=duration_ms)
    return _within_limit(claimed) if claimed is not None else None


def job_finish(job, *, status, outcome, error, duration_ms, retry_in=None) -> bool:
    """Record the attempt's outcome; False when the lease was lost (another attempt owns the row)."""
    finished, _ = _job_finish_and_claim(
        job, status=status, outcome=outcome, error=error, duration_ms=duration_ms, retry_in=retry_in
    )
    return finished


@functools.cache
def _finish_sql(*, claims: bool) -> str:
    """One statement: the fenced UPDATE of the job, the INSERT of its JobAttempt, and the next job's claim.

    Without a claim it returns the finished job's id when the fence held. With one it returns the
    claimed row (absent when that job is not due or someone else has it), and a row holding only
    the finished job's id (its other columns NULL) when the fence held and no job was claimed, or
    a row of NULLs when the fence failed and a job was claimed: one row in the common case, so one
    model built. The data-modifying CTEs all run, whether the query reads them or not. The claim is
    read first, so it runs before the finish locks its row: two workers whose messages share jobs
    (a message sent twice) never wait on each other in a cycle.
    """
    q = connection.ops.quote_name
    finish = (
        f"WITH finished AS (UPDATE {q(Job._meta.db_table)} SET status = %s, last_error = %s,"
        " lease_expires_at = NULL, updated_at = %s, finished_at = %s, run_after = COALESCE(%s, run_after),"
        " dispatched_at = CASE WHEN %s THEN NULL ELSE dispatched_at END, payload = COALESCE(%s, payload)"
        " WHERE id = %s AND status = %s AND attempts = %s RETURNING id),"
        f" attempt AS (INSERT INTO {q(JobAttempt._meta.db_table)}"
        " (job_id, number, started_at, finished_at, outcome, error, duration_ms)"
        " SELECT id, %s, %s, %s, %s, %s, %s FROM finished)"
    )
    if not claims:
        return f"{finish} SELECT id FROM finished"
    fields = Job._meta.concrete_fields
    finished_id_only = ", ".join("id" if field.primary_key else "NULL" for field in fields)
    nulls = ", ".join("NULL" for _ in fields)
    return (
        f"{finish}, claimed AS ({_claim_sql()})"
        " SELECT {columns} FROM claimed"
        f" UNION ALL SELECT {finished_id_only} FROM finished WHERE NOT EXISTS (SELECT FROM claimed)"
        f" UNION ALL SELECT {nulls} WHERE NOT EXISTS (SELECT FROM finished) AND EXISTS (SELECT FROM claimed)"
    )


def _job_finish_and_claim(job, *, status, outcome, error, duration_ms, retry_in=None, claim_next=None):
    """Record the attempt's outcome, fenced on the attempt number, and claim job `claim_next` (an id or None).

    (finished, claimed job or None). A dead job's alert is enqueued in the same transaction.
    """
    now = timezone.now()
    dt = connection.ops.adapt_datetimefield_value
    error = error[-MAX_ERROR_CHARS:]
    retrying = status == Job.Status.PENDING
    payload = None
    if status == Job.Status.SUCCEEDED and (on_success := getattr(job, "payload_on_success", None)) is not None:
        payload = Job._meta.get_field("payload").get_db_prep_save(on_success, connection)
    run_after = dt(now + timedelta(seconds=retry_in or 0)) if retrying else None
    params = [
        status, error, dt(now), None if retrying else dt(now), run_after, retrying, payload,
        job.pk, Job.Status.RUNNING, job.attempts,  # the fence
        job.attempts, dt(job.started_at), dt(now), outcome, error, duration_ms,  # the attempt
    ]  # fmt: skip
    claimed = None
    with transaction.atomic() if status == Job.Status.DEAD else nullcontext():
        if claim_next is None:
            with connection.cursor() as cursor:
                cursor.execute(_finish_sql(claims=False), params)
                finished = cursor.fetchone() is not None
        else:
            rows = fetch_models(Job, _finish_sql(claims=True), [*params, *_claim_params(now, claim_next)])
            claimed = next((row for row in rows if row.pk == claim_next), None)
            finished = any(row.pk == job.pk for row in rows) or (claimed is not None and len(rows) == 1)
        if finished and status == Job.Status.DEAD:
            _job_dead_letter(job, error=error, died_at=now)
    return finished, claimed


def _job_dead_letter(job, *, error, died_at):
    """Alert once per death: log now, email operators through a job of its own."""
    logger.error("job_dead", job_id=job.pk, kind=job.kind, attempts=job.attempts, error=error[:300])
    if job.kind == DEAD_ALERT_KIND:
        return  # an alert about an alert would loop
    job_enqueue(
        kind=DEAD_ALERT_KIND,
        payload={"job_id": job.pk},
        key=f"{DEAD_ALERT_KIND}:{job.pk}:{died_at.isoformat()}",
        max_attempts=5,
    )


def jobs_sweep() -> dict:
    """Beat-driven safety net: reclaim jobs whose worker died, dispatch due jobs nobody sent.

    Its time is kept in the cache: /readyz is unhealthy when the sweep stops running.
    """
    done = {"reclaimed": _jobs_reclaim_expired(), "dispatched": _jobs_dispatch_due()}
    cache.set(LAST_SWEEP_CACHE_KEY, time.time(), timeout=None)
    return done


def _jobs_reclaim_expired() -> int:
    now = timezone.now()
    reclaimed = 0
    with transaction.atomic():
        expired = list(
            Job.objects.select_for_update(skip_locked=True).filter(status=Job.Status.RUNNING, lease_expires_at__lt=now)[
                :SWEEP_BATCH
            ]
        )
        for job in expired:
            error = "lease expired: the worker died or overran its lease"
            out_of_attempts = job.attempts >= job.max_attempts
            if out_of_attempts:
                error = f"gave up after {job.attempts} attempts; {error}"
            reclaimed += job_finish(
                job,
                status=Job.Status.DEAD if out_of_attempts else Job.Status.PENDING,
                outcome=JobAttempt.Outcome.LOST,
                error=error,
                duration_ms=int((now - job.started_at).total_seconds() * 1000) if job.started_at else None,
            )
    if reclaimed:
        logger.warning("jobs_reclaimed", count=reclaimed)
    return reclaimed


def _jobs_dispatch_due() -> int:
    now = timezone.now()
    with transaction.atomic():
        due = (
            Job.objects.select_for_update(skip_locked=True)
            .filter(status=Job.Status.PENDING, run_after__lte=now)
            .filter(Q(dispatched_at__isnull=True) | Q(dispatched_at__lt=now - redispatch_after()))
            .order_by("run_after")
            .values_list("pk", flat=True)[:SWEEP_BATCH]
        )
        job_ids = list(due)
        Job.objects.filter(pk__in=job_ids).update(dispatched_at=now)
        transaction.on_commit(lambda: send_run_messages(job_ids))
    return len(job_ids)
