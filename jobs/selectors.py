from datetime import UTC, datetime

from django.core.cache import cache
from django.db.models import Count, Q

from jobs.models import Job

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


def jobs_last_sweep_at() -> datetime | None:
    """When the dispatcher's sweep last finished (any process), or None if not since the cache was empty."""
    stamp = cache.get(LAST_SWEEP_CACHE_KEY)
    return datetime.fromtimestamp(stamp, UTC) if stamp is not None else None
