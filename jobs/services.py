"""Writes of the job layer: enqueue, claim, run, retry, dead-letter, replay, sweep.

Claiming is a conditional UPDATE (status pending → running), so two workers
that receive the same job id never both run it. Finishing is fenced on the
attempt number, so a worker whose lease was taken away cannot overwrite the
outcome of the attempt that replaced it.

Enqueue, claim and finish are one SQL statement each (INSERT … ON CONFLICT,
UPDATE … RETURNING, UPDATE feeding INSERT): the ORM's get_or_create, update
then get, and atomic pair took 12 statements per job instead of 5, and
bench/jobs measured the difference. Several jobs of one transaction
(`job_enqueue_many`) are one INSERT and one after-commit callback; their run
message is batched with other transactions' by jobs/dispatch.py (bench/jobs
and bench/intake measured the difference).
"""

import random
import time
import traceback
import uuid
from collections.abc import Iterable
from datetime import timedelta

import structlog
from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from config.db import fetch_models, insert_many_on_conflict
from jobs import JobSpec
from jobs.dispatch import RunMessageBatcher
from jobs.errors import PermanentError, SkipJob, TransientError
from jobs.handlers import PING_KIND
from jobs.models import Job, JobAttempt
from jobs.registry import get_handler, is_batched

logger = structlog.get_logger(__name__)

DEAD_ALERT_KIND = "jobs.dead_alert"
# A run message not acted on within this long (lost publish, broker restart) is sent again.
REDISPATCH_AFTER = timedelta(seconds=30)
SWEEP_BATCH = 500
MAX_ERROR_CHARS = 4000


def _send_run_messages(job_ids):
    """One run message per job: for the sweep and replays, whose jobs any free worker may take."""
    # Imported here: tasks import this module.
    from jobs.tasks import run_job

    for job_id in job_ids:
        try:
            run_job.delay(job_id)
        except Exception as exc:  # broker down: the sweep sends it again later
            logger.warning("job_dispatch_failed", job_id=job_id, error=type(exc).__name__)


def _send_one_run_message(job_ids):
    """One run message for a batch of due jobs (jobs/dispatch.py): one publish, whatever their number.

    A single job goes as `jobs.run`, several as `jobs.run_many`, which one
    worker runs in order. If one of them holds that worker up, the sweep sends
    the others again after REDISPATCH_AFTER, and whichever worker claims a
    job first runs it (the claim is a conditional UPDATE).
    """
    from jobs.tasks import run_job, run_jobs

    try:
        if len(job_ids) == 1:
            run_job.delay(job_ids[0])
        else:
            run_jobs.delay(list(job_ids))
    except Exception as exc:  # broker down: the sweep sends them again later
        logger.warning("job_dispatch_failed", job_ids=list(job_ids), error=type(exc).__name__)


# Due jobs of committed transactions go to the workers through this, batched (jobs/dispatch.py).
run_messages = RunMessageBatcher(_send_one_run_message)


def _dispatch_committed(batched, unbatched):
    if batched:
        run_messages.submit(batched)
    _send_run_messages(unbatched)  # kinds registered with batched=False: a message each, now


def job_enqueue(*, kind, payload, key, run_after=None, max_attempts=None, dispatch=True) -> Job:
    """Record a side effect in the caller's transaction; an existing key returns its job.

    Due jobs are sent to the workers once the transaction commits; later ones
    are picked up by the sweep when their time comes. `dispatch=False` is for a
    caller that runs the job itself right after commit (`job_run`): no run
    message is sent, and the sweep sends one if the job is still pending after
    REDISPATCH_AFTER (the caller died).
    """
    spec = JobSpec(kind=kind, payload=payload, key=key, run_after=run_after, max_attempts=max_attempts)
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
    for spec in specs:
        if get_handler(spec.kind) is None:
            raise LookupError(f"no handler registered for job kind {spec.kind!r}")
    now = timezone.now()
    candidates = {}  # key -> Job; the first spec of a key wins, as with successive job_enqueue calls
    for spec in specs:
        if spec.key in candidates:
            continue
        run_after = spec.run_after or now
        candidates[spec.key] = Job(
            kind=spec.kind,
            key=spec.key,
            payload=spec.payload,
            run_after=run_after,
            max_attempts=spec.max_attempts or settings.JOBS_DEFAULT_MAX_ATTEMPTS,
            dispatched_at=now if run_after <= now else None,
            created_at=now,
        )
    q = connection.ops.quote_name
    rows = insert_many_on_conflict(
        list(candidates.values()),
        on_conflict=f"ON CONFLICT ({q(Job._meta.get_field('key').column)}) DO NOTHING",
        returning=f"{q(Job._meta.pk.column)}, {q(Job._meta.get_field('key').column)}",
    )
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
        transaction.on_commit(lambda: _dispatch_committed(batched, unbatched))
    return [jobs_by_key[spec.key] for spec in specs]


def job_claim(*, job_id) -> Job | None:
    """pending -> running in one statement that also returns the row (UPDATE ... RETURNING)."""
    now = timezone.now()
    dt = connection.ops.adapt_datetimefield_value
    q = connection.ops.quote_name
    claimed = fetch_models(
        Job,
        f"UPDATE {q(Job._meta.db_table)} SET status = %s, attempts = attempts + 1, started_at = %s,"
        " lease_expires_at = %s, updated_at = %s"
        " WHERE id = %s AND status = %s AND run_after <= %s RETURNING {columns}",
        [
            Job.Status.RUNNING,
            dt(now),
            dt(now + timedelta(seconds=settings.JOBS_LEASE_SECONDS)),
            dt(now),
            job_id,
            Job.Status.PENDING,
            dt(now),
        ],
    )
    return claimed[0] if claimed else None


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
    log = logger.bind(job_id=job.pk, kind=job.kind, attempt=job.attempts)
    started = time.monotonic()
    handler = get_handler(job.kind)
    status, outcome, error, retry_in = Job.Status.SUCCEEDED, JobAttempt.Outcome.SUCCEEDED, "", None
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
        status, outcome, error = Job.Status.PENDING, JobAttempt.Outcome.RETRY, traceback.format_exc()
        retry_in = backoff_delay(job.attempts)
    if status == Job.Status.PENDING and job.attempts >= job.max_attempts:
        status, outcome = Job.Status.DEAD, JobAttempt.Outcome.FAILED
        error = f"gave up after {job.attempts} attempts; {error}"
    duration_ms = int((time.monotonic() - started) * 1000)
    if _job_finish(job, status=status, outcome=outcome, error=error, retry_in=retry_in, duration_ms=duration_ms):
        log.info("job_finished", status=status, duration_ms=duration_ms, retry_in=retry_in)
    else:
        log.warning("job_lease_lost", duration_ms=duration_ms)
    return job


def _job_finish(job, *, status, outcome, error, duration_ms, retry_in=None) -> bool:
    now = timezone.now()
    error = error[-MAX_ERROR_CHARS:]
    changes = {
        "status": status,
        "last_error": error,
        "lease_expires_at": None,
        "updated_at": now,
        "finished_at": None if status == Job.Status.PENDING else now,
    }
    if status == Job.Status.PENDING:
        changes.update(run_after=now + timedelta(seconds=retry_in or 0), dispatched_at=None)
    if status != Job.Status.DEAD and connection.vendor == "postgresql":
        return _job_finish_one_statement(
            job, changes, outcome=outcome, error=error, finished_at=now, duration_ms=duration_ms
        )
    with transaction.atomic():
        # Fenced on the attempt number: a lost lease means another attempt owns the row now.
        fenced = Job.objects.filter(pk=job.pk, status=Job.Status.RUNNING, attempts=job.attempts)
        if not fenced.update(**changes):
            return False
        JobAttempt.objects.create(
            job=job,
            number=job.attempts,
            started_at=job.started_at,
            finished_at=now,
            outcome=outcome,
            error=error,
            duration_ms=duration_ms,
        )
        if status == Job.Status.DEAD:
            _job_dead_letter(job, error=error, died_at=now)
    return True


def _job_finish_one_statement(job, changes, *, outcome, error, finished_at, duration_ms) -> bool:
    """The fenced UPDATE feeds the attempt INSERT in one statement (PostgreSQL: DML in WITH).

    Same effect as the two statements in a transaction, without BEGIN and COMMIT.
    """
    q = connection.ops.quote_name
    fields = [Job._meta.get_field(name) for name in changes]
    attempt = JobAttempt._meta
    sql = (
        f"WITH fenced AS (UPDATE {q(Job._meta.db_table)}"
        f" SET {', '.join(f'{q(f.column)} = %s' for f in fields)}"
        " WHERE id = %s AND status = %s AND attempts = %s RETURNING id)"
        f" INSERT INTO {q(attempt.db_table)} (job_id, number, started_at, finished_at, outcome, error, duration_ms)"
        " SELECT id, %s, %s, %s, %s, %s, %s FROM fenced"
    )
    params = [f.get_db_prep_save(value, connection) for f, value in zip(fields, changes.values(), strict=True)]
    params += [job.pk, Job.Status.RUNNING, job.attempts]
    params += [job.attempts, job.started_at, finished_at, outcome, error, duration_ms]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount == 1


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
    """Beat-driven safety net: reclaim jobs whose worker died, dispatch due jobs nobody sent."""
    return {"reclaimed": _jobs_reclaim_expired(), "dispatched": _jobs_dispatch_due()}


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
            reclaimed += _job_finish(
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
            .filter(Q(dispatched_at__isnull=True) | Q(dispatched_at__lt=now - REDISPATCH_AFTER))
            .order_by("run_after")
            .values_list("pk", flat=True)[:SWEEP_BATCH]
        )
        job_ids = list(due)
        Job.objects.filter(pk__in=job_ids).update(dispatched_at=now)
        transaction.on_commit(lambda: _send_run_messages(job_ids))
    return len(job_ids)


def jobs_replay(*, job_ids, actor: str) -> int:
    """Run dead or skipped jobs again now, with JOBS_REPLAY_ATTEMPTS more attempts.

    Attempt numbers keep counting, so the history of the earlier run stays intact.
    """
    now = timezone.now()
    with transaction.atomic():
        replayable = Job.objects.filter(pk__in=job_ids, status__in=[Job.Status.DEAD, Job.Status.SKIPPED])
        ids = list(replayable.values_list("pk", flat=True))
        Job.objects.filter(pk__in=ids).update(
            status=Job.Status.PENDING,
            max_attempts=F("attempts") + settings.JOBS_REPLAY_ATTEMPTS,
            run_after=now,
            dispatched_at=now,
            finished_at=None,
            last_error=f"replayed by {actor}",
            updated_at=now,
        )
        transaction.on_commit(lambda: _send_run_messages(ids))
    logger.info("jobs_replayed", count=len(ids), actor=actor)
    return len(ids)


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
