from datetime import UTC, datetime

from django.core.cache import cache
from django.db.models import Count, Min, Q, TextField
from django.db.models.fields.json import KT
from django.db.models.functions import Cast

from jobs.models import Job, JobAttempt, JobStep

LAST_SWEEP_CACHE_KEY = "jobs:last-sweep-at"  # written by jobs.runtime.jobs_sweep


def jobs_dead_count() -> int:
    return Job.objects.filter(status=Job.Status.DEAD).count()


def jobs_for_key_prefix(prefix: str):
    """Jobs whose idempotency key starts with `prefix`, e.g. every job of one lead."""
    return Job.objects.filter(key__startswith=prefix)


def jobs_for_keys(keys):
    return Job.objects.filter(key__in=list(keys)).order_by("created_at")


def jobs_unfinished_for_key_prefix(prefix: str):
    return jobs_for_key_prefix(prefix).filter(status__in=[Job.Status.PENDING, Job.Status.RUNNING])


def jobs_unfinished_for_keys(keys):
    return Job.objects.filter(key__in=list(keys), status__in=[Job.Status.PENDING, Job.Status.RUNNING])


def jobs_health_by_kind(*, store_ids=None) -> list[dict]:
    """Unfinished and dead jobs per kind: pending (of which retrying: at least one attempt made), running, dead.

    Reads only those statuses (through job_due_idx), never the finished rows, which are most of the table.
    """
    counts: dict[str, dict] = {}
    unfinished = Job.objects.filter(status__in=[Job.Status.PENDING, Job.Status.RUNNING, Job.Status.DEAD])
    if store_ids is not None:
        unfinished = unfinished.filter(store__in=store_ids)
    rows = (
        unfinished.values("kind", "status")
        .annotate(count=Count("pk"), retrying=Count("pk", filter=Q(attempts__gt=0)))
        .order_by()
    )
    for row in rows:
        empty = {"kind": row["kind"], "pending": 0, "retrying": 0, "running": 0, "dead": 0}
        kind = counts.setdefault(row["kind"], empty)
        kind[row["status"]] = row["count"]
        if row["status"] == Job.Status.PENDING:
            kind["retrying"] = row["retrying"]
    return sorted(counts.values(), key=lambda kind: kind["kind"])


def jobs_queue_by_kind(*, now: datetime) -> list[dict]:
    """Per kind with unfinished or dead jobs: pending, running and dead counts, and the run_after of its oldest
    pending job due by `now` (None when none is). One statement, reading only those statuses (job_due_idx)."""
    pending = Q(status=Job.Status.PENDING)
    return list(
        Job.objects.filter(status__in=[Job.Status.PENDING, Job.Status.RUNNING, Job.Status.DEAD])
        .values("kind")
        .annotate(
            pending=Count("pk", filter=pending),
            running=Count("pk", filter=Q(status=Job.Status.RUNNING)),
            dead=Count("pk", filter=Q(status=Job.Status.DEAD)),
            oldest_due_at=Min("run_after", filter=pending & Q(run_after__lte=now)),
        )
        .order_by()
    )


def jobs_last_sweep_at() -> datetime | None:
    """When the dispatcher's sweep last finished (any process), or None if not since the cache was empty."""
    stamp = cache.get(LAST_SWEEP_CACHE_KEY)
    return datetime.fromtimestamp(stamp, UTC) if stamp is not None else None


def jobs_subject_rows(*, refs, texts) -> dict[str, list[dict]]:
    """The jobs naming a person, whole, with their attempts and steps. {model label: rows}

    `refs`: (kind prefix, payload key, ids): a job of a kind starting with the prefix ("" for any) whose
    payload names one of the ids under that key. `texts`: a job whose key, payload or last error holds one;
    looked for among the jobs not succeeded only (through job_due_idx): a job that succeeded keeps ids alone,
    its last error cleared and a payload that carried personal data replaced (jobs.keep_payload_on_success).
    """
    by_ref, annotations = Q(pk__in=[]), {}
    for number, (kind_prefix, name, ids) in enumerate(refs):
        if ids := [str(pk) for pk in ids]:
            annotations[f"ref{number}"] = KT(f"payload__{name}")
            ref = Q(**{f"ref{number}__in": ids})
            by_ref |= ref & Q(kind__startswith=kind_prefix) if kind_prefix else ref
    # Unordered: the default order would walk the created_at index over the whole table, not scan it.
    referring = Job.objects.annotate(**annotations).filter(by_ref).order_by().values_list("pk", flat=True)
    named = Q(pk__in=[])
    for text in texts:
        named |= Q(key__icontains=text) | Q(last_error__icontains=text) | Q(payload_text__icontains=text)
    not_succeeded = Job.objects.filter(status__in=[status for status in Job.Status if status != Job.Status.SUCCEEDED])
    named = not_succeeded.annotate(payload_text=Cast("payload", TextField())).filter(named).order_by()
    ids = sorted({*referring, *named.values_list("pk", flat=True)})
    found = list(Job.objects.filter(pk__in=ids).order_by("pk").values())
    keys = [job["key"] for job in found]
    return {
        Job._meta.label: found,
        JobAttempt._meta.label: list(JobAttempt.objects.filter(job__in=ids).order_by("job_id", "number").values()),
        JobStep._meta.label: list(JobStep.objects.filter(job_key__in=keys).order_by("pk").values()),
    }
