"""The alert about a dead job: who gets it and what it says. integrations.mail sends it (DEAD_ALERT_KIND)."""

from django.conf import settings
from django.core.mail import EmailMessage
from django.urls import reverse

from jobs.errors import SkipJob
from jobs.models import Job


def dead_alert_message(job) -> EmailMessage:
    """The email to OPS_ALERT_EMAILS about the dead job that alert `job` names; SkipJob while nobody is set."""
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
    return EmailMessage(subject=f"[leadgen] dead job: {dead.kind} #{dead.pk}", body=body, to=settings.OPS_ALERT_EMAILS)
