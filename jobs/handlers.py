"""Handlers owned by the job layer itself. The dead-job alert is sent by integrations.mail, which owns sending."""

import structlog

from jobs.kinds import PING_KIND, RETENTION_KIND
from jobs.registry import handler
from jobs.retention import jobs_retention_run

logger = structlog.get_logger(__name__)


@handler(PING_KIND)
def ping(job):
    """No-op that proves the path web → database → broker → worker works end to end."""
    logger.info("pong", job_id=job.pk)


@handler(RETENTION_KIND, batched=False)
def retention(job):
    jobs_retention_run(job=job)
