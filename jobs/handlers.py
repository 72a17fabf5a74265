"""Handlers owned by the job layer itself."""

import structlog
from django.conf import settings
from django.core.mail import EmailMessage
from django.urls import reverse

from integrations.mail import send_message_once
from jobs.errors import SkipJob
from jobs.kinds import DEAD_ALERT_KIND, PING_KIND, RETENTION_KIND
from jobs.models import Job
from jobs.registry import handler
from jobs.retention import jobs_retention_run

logger = structlog.get_logger(__name__)


@handler(PING_KIND)
def ping(job):
    """No-op that proves the path web → database → broker → worker works end to end."""
    logger.info("pong", job_id=job.pk)


@handler(DEAD_ALERT_KIND)
def dead_alert(job):
    if not settings.OPS_ALERT_EMAILS:
        raise SkipJob("not configured: OPS_ALERT_EMAILS is empty")
    dead = Job.objects.get(pk=job.payload["job_id"])
    admin_url = settings.SITE_URL.rstrip("/") + reverse("admin:jobs_job_change", args=[dead.pk])
    body = (
        f"Job {dead.pk} ({dead.kind}) is dead after {dead.attempts} attempt(s).\n\n"
        f"Key: {dead.key}\n"
        f"Last error:\n{dead.last_error[:2000]}\n\n"
        f"Inspect and replay it in admin: {admin_url}\n"
    )
    send_message_once(
        job,
        EmailMessage(
            subject=f"[leadgen] dead job: {dead.kind} #{dead.pk}",
            body=body,
            to=settings.OPS_ALERT_EMAILS,
        )
    )


@handler(RETENTION_KIND, batched=False)
def retention(job):
    jobs_retention_run(job=job)
