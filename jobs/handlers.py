"""Handlers owned by the job layer itself."""

import structlog
from django.conf import settings
from django.core.mail import EmailMessage
from django.urls import reverse

from integrations.mail import send_message
from jobs.errors import SkipJob
from jobs.registry import handler

logger = structlog.get_logger(__name__)

PING_KIND = "jobs.ping"


@handler(PING_KIND)
def ping(job):
    """No-op that proves the path web → database → broker → worker works end to end."""
    logger.info("pong", job_id=job.pk)


@handler("jobs.dead_alert")
def dead_alert(job):
    from jobs.models import Job

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
    send_message(
        EmailMessage(
            subject=f"[leadgen] dead job: {dead.kind} #{dead.pk}",
            body=body,
            to=settings.OPS_ALERT_EMAILS,
        )
    )
