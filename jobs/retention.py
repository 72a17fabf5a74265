"""Retention of the job table: succeeded and skipped jobs older than JOBS_RETENTION_DAYS go, with their
attempts and steps.

Beat queues one retention job a day; each job deletes one batch of
JOBS_RETENTION_BATCH jobs in one transaction and, when the batch was full,
queues the next part, so no transaction or job runs long and a worker that
dies mid-way loses one batch of work at most. Dead jobs stay until staff
replay or discard them; pending and running jobs are never touched. The rows
of a batch are locked from the SELECT to the commit.
"""

from datetime import timedelta

import structlog
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from jobs.kinds import RETENTION_KIND
from jobs.models import Job, JobAttempt, JobStep
from jobs.services import job_enqueue

logger = structlog.get_logger(__name__)

EXPIRING = (Job.Status.SUCCEEDED, Job.Status.SKIPPED)


def jobs_retention_start() -> Job:
    """Queue today's retention pass; triggers on the same day share one job."""
    return job_enqueue(kind=RETENTION_KIND, payload={"part": 1}, key=f"{RETENTION_KIND}:{timezone.now():%Y-%m-%d}")


def jobs_delete_expired(*, batch_size: int) -> int:
    """Delete up to `batch_size` finished jobs older than JOBS_RETENTION_DAYS, and their attempts; oldest first."""
    cutoff = timezone.now() - timedelta(days=settings.JOBS_RETENTION_DAYS)
    # run_after <= finished_at, so the run_after bound lets job_due_idx (status, run_after) find them.
    expired = Job.objects.filter(status__in=EXPIRING, run_after__lt=cutoff, finished_at__lt=cutoff)
    with transaction.atomic():
        # Locked until commit: a replay or discard of one of them waits, then finds it gone.
        locked = expired.select_for_update(skip_locked=True).order_by("run_after")
        rows = list(locked.values_list("pk", "key")[:batch_size])
        if not rows:
            return 0
        ids, keys = [pk for pk, _ in rows], [key for _, key in rows]
        # Plain DELETEs: the ORM's cascade would first SELECT every attempt it deletes.
        JobAttempt.objects.filter(job_id__in=ids)._raw_delete(JobAttempt.objects.db)
        JobStep.objects.filter(job_key__in=keys)._raw_delete(JobStep.objects.db)
        return Job.objects.filter(pk__in=ids)._raw_delete(Job.objects.db)


def jobs_retention_run(*, job) -> int:
    """One batch; a full batch queues the next part."""
    batch_size = settings.JOBS_RETENTION_BATCH
    deleted = jobs_delete_expired(batch_size=batch_size)
    part = job.payload.get("part", 1)
    more = deleted == batch_size
    if more:
        job_enqueue(kind=RETENTION_KIND, payload={"part": part + 1}, key=f"{job.key.split('#', 1)[0]}#{part + 1}")
    logger.info("jobs_retention_batch", part=part, deleted=deleted, more=more)
    return deleted
