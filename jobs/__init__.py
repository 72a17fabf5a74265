"""The job layer's public API: durable side effects.

Everything that leaves the request path goes through `enqueue` (or
`enqueue_many`) inside the transaction of the business change; the job runs
after commit, is retried on transient errors and dead-lettered on permanent
ones. Other apps use only the names below, never the modules inside jobs/.

The functions import their implementation when called: this package is
imported while Django loads its apps (integrations import the errors), before
models can be.
"""

from jobs.errors import PermanentError, SkipJob, TransientError
from jobs.kinds import DEAD_ALERT_KIND
from jobs.registry import handler, handler_of_many, registered_kinds
from jobs.spec import ROW_ID, JobSpec

__all__ = [
    "DEAD_ALERT_KIND",
    "ROW_ID",
    "JobSpec",
    "PermanentError",
    "SkipJob",
    "TransientError",
    "circuit_breaker",
    "circuit_opened_at",
    "circuit_state",
    "dead_alert_message",
    "dead_count",
    "discard",
    "enqueue",
    "enqueue_many",
    "enqueue_many_with_row",
    "handler",
    "handler_of_many",
    "has_unfinished",
    "health_by_kind",
    "job_with_key",
    "jobs_with_key_prefix",
    "jobs_with_keys",
    "keep_payload_on_success",
    "keys_in_progress",
    "last_sweep_at",
    "queue_by_kind",
    "registered_kinds",
    "replay",
    "replay_or_enqueue",
    "run_now",
    "send_test",
    "step_once",
    "subject_erase",
    "subject_rows",
]


# --- writes ---------------------------------------------------------------------------------


def enqueue(kind, payload, *, key, run_after=None, max_attempts=None, dispatch=True, store_id=None):
    """Record a job in the caller's transaction; it runs after commit. An existing key returns its job.

    `dispatch=False` sends no run message: for a caller that calls `run_now` right after commit.
    `store_id`: the store whose data the job handles (its staff see the job); the payload holds ids and
    the least the handler needs, never a copy of personal data it can read from its row.
    """
    from jobs.services import job_enqueue

    return job_enqueue(
        kind=kind, payload=payload, key=key, run_after=run_after, max_attempts=max_attempts, dispatch=dispatch,
        store_id=store_id,
    )  # fmt: skip


def enqueue_many(specs, *, dispatch=True):
    """Record several jobs (`JobSpec`s) in the caller's transaction with one INSERT; the due ones go to
    the workers in one run message after commit. One job per spec, in order."""
    from jobs.services import job_enqueue_many

    return job_enqueue_many(specs=specs, dispatch=dispatch)


def enqueue_many_with_row(row, specs, *, dispatch=True):
    """`enqueue_many` with `row`, an unsaved model instance, inserted in the same statement (one round trip).

    `specs()` is called once the row's values are set and names the row's id ROW_ID (in keys, as payload
    values): `JobSpec(kind, {"lead_id": ROW_ID}, key=f"{kind}:{ROW_ID}")`. Sets the row's primary key.
    """
    from jobs.services import job_enqueue_many_with_row

    return job_enqueue_many_with_row(row=row, specs=specs, dispatch=dispatch)


def run_now(job_id) -> bool:
    """Claim and run a committed job in this process, once; False when it is not due or another worker has it.

    Failures are the job layer's: they are recorded and retried like any job's.
    """
    from jobs.runtime import job_run

    return job_run(job_id=job_id) is not None


def replay(*, job_ids, actor: str) -> int:
    """Run dead or skipped jobs again now; returns how many were replayed."""
    from jobs.services import jobs_replay

    return jobs_replay(job_ids=job_ids, actor=actor)


def replay_or_enqueue(kind, payload, *, key, actor: str, store_id=None) -> bool:
    """Send a side effect again: enqueue it if it never was, replay it if it died or was skipped.

    False when it is already on its way or done. Call inside the transaction that records why.
    """
    from jobs.models import Job
    from jobs.services import job_enqueue, jobs_replay

    existing = Job.objects.filter(key=key).first()
    if existing is None:
        job_enqueue(kind=kind, payload=payload, key=key, store_id=store_id)
        return True
    if existing.status not in (Job.Status.DEAD, Job.Status.SKIPPED):
        return False
    return jobs_replay(job_ids=[existing.pk], actor=actor) > 0


def subject_erase(*, job_ids) -> dict[str, int]:
    """Delete these jobs, their attempts and steps, whatever their status (a data subject's erasure).
    {model label: rows deleted}."""
    from jobs.services import jobs_subject_erase

    return jobs_subject_erase(job_ids=job_ids)


def discard(*, job_ids, actor: str) -> int:
    """Stop pending or dead jobs for good; the rows stay as the record."""
    from jobs.services import jobs_discard

    return jobs_discard(job_ids=job_ids, actor=actor)


def send_test(*, actor: str):
    """A no-op job that proves web → database → broker → worker end to end."""
    from jobs.services import job_send_test

    return job_send_test(actor=actor)


# --- inside a handler -----------------------------------------------------------------------


def step_once(job, step: str, perform):
    """Run `perform()` unless an earlier run of this job (same key) completed `step`; returns its result.

    The step is recorded the moment `perform` returns, in its own transaction,
    so a job re-run after a partial success (its finish failed, its worker died
    after the side effect) skips what was already done. `perform` returns a
    JSON-serialisable dict (or None), given back as is on a later run.
    """
    from jobs.steps import job_step_record, job_step_result

    done = job_step_result(job=job, step=step)
    if done is not None:
        return done
    result = perform() or {}
    job_step_record(job=job, step=step, result=result)
    return result


def dead_alert_message(job):
    """The email that alert `job` (DEAD_ALERT_KIND) sends about its dead job; SkipJob while OPS_ALERT_EMAILS is empty.

    The job layer says what the alert is; integrations.mail, which owns sending, handles the kind."""
    from jobs.alerts import dead_alert_message as message

    return message(job)


def keep_payload_on_success(job, payload: dict) -> None:
    """Replace the job's payload with `payload` when this run succeeds (written with its finish).

    For payloads that carry personal data the finished job no longer needs; a
    failed run keeps the original, which the retry needs.
    """
    job.payload_on_success = payload


# --- circuit breakers -----------------------------------------------------------------------


def circuit_breaker(name: str, *, fail_max: int, reset_timeout: float, exclude=()):
    """A pybreaker breaker whose state every process shares through Django's cache."""
    from jobs.breaker import circuit_breaker as make

    return make(name, fail_max=fail_max, reset_timeout=reset_timeout, exclude=exclude)


def circuit_opened_at(name: str):
    """When the breaker `name` last opened (an aware datetime), or None."""
    from jobs.breaker import CacheCircuitStorage

    return CacheCircuitStorage(name).opened_at


def circuit_state(name: str) -> str:
    """The shared state of the breaker `name`: "closed", "open" or "half-open"."""
    from jobs.breaker import CacheCircuitStorage

    return CacheCircuitStorage(name).state


# --- reads ----------------------------------------------------------------------------------


def dead_count() -> int:
    from jobs.selectors import jobs_dead_count

    return jobs_dead_count()


def last_sweep_at():
    """When the dispatcher's sweep last finished (any process), or None."""
    from jobs.selectors import jobs_last_sweep_at

    return jobs_last_sweep_at()


def jobs_with_key_prefix(prefix: str):
    """Jobs whose key starts with `prefix` (e.g. every job of one lead), as a queryset."""
    from jobs.selectors import jobs_for_key_prefix

    return jobs_for_key_prefix(prefix)


def jobs_with_keys(keys):
    """Jobs with one of these keys, oldest first, as a queryset."""
    from jobs.selectors import jobs_for_keys

    return jobs_for_keys(keys)


def job_with_key(key: str):
    from jobs.selectors import jobs_for_keys

    return jobs_for_keys([key]).first()


def has_unfinished(prefix: str) -> bool:
    """Whether a job whose key starts with `prefix` is pending or running."""
    from jobs.selectors import jobs_unfinished_for_key_prefix

    return jobs_unfinished_for_key_prefix(prefix).exists()


def keys_in_progress(keys) -> set[str]:
    """Which of these exact keys have a job pending or running (a safety net's question)."""
    from jobs.selectors import jobs_unfinished_for_keys

    return set(jobs_unfinished_for_keys(keys).values_list("key", flat=True))


def subject_rows(*, refs, texts) -> dict[str, list[dict]]:
    """The jobs naming a data subject, whole, with their attempts and steps. {model label: rows}

    `refs`: (kind prefix, payload key, ids) — a job of a kind starting with the prefix ("" for any) whose
    payload names one of the ids under that key; `texts`: a job not succeeded whose key, payload or last error
    holds one (a succeeded job keeps ids alone).
    """
    from jobs.selectors import jobs_subject_rows

    return jobs_subject_rows(refs=refs, texts=texts)


def health_by_kind(*, store_ids=None) -> list[dict]:
    """Per kind: pending, retrying (pending after a failed attempt), running and dead counts.

    `store_ids`: only the jobs of those stores (None: every job)."""
    from jobs.selectors import jobs_health_by_kind

    return jobs_health_by_kind(store_ids=store_ids)


def queue_by_kind(*, now) -> list[dict]:
    """Per kind with unfinished or dead jobs: pending, running and dead counts, and `oldest_due_at`: the run_after
    of its oldest pending job due by `now` (None when none is). One query, for the metrics scrape."""
    from jobs.selectors import jobs_queue_by_kind

    return jobs_queue_by_kind(now=now)
