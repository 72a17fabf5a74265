"""Job handlers of prototypes: the processor's checks, and the ready and failed alerts, note and email.

Each loads the prototype, is safe to run again and leaves retries to the job layer. A retry after a call
whose answer was lost finds what that call created (the ClickUp task and the Pipedrive note carry the
job's key as their reference; the email is sent once per job key) instead of creating it again.
"""

import structlog
from django.conf import settings
from django.core.mail import EmailMultiAlternatives
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone

import jobs
from integrations.clickup import client as clickup
from integrations.mail import send_message_once
from integrations.pipedrive import client as pipedrive
from jobs import PermanentError, SkipJob, TransientError
from prototypes import processor
from prototypes.models import Prototype

logger = structlog.get_logger(__name__)

ALERT_TAG = "prototype"
ALERT_STEP = "clickup_task"
CLOCK_SKEW_MS = 10_000  # between our clock and ClickUp's


def _prototype(job) -> Prototype:
    try:
        return Prototype.objects.select_related("lead").get(pk=job.payload["prototype_id"])
    except Prototype.DoesNotExist as exc:
        raise PermanentError("the prototype no longer exists") from exc


@jobs.handler(processor.CHECK_KIND, concurrency=settings.PROTOTYPES_CHECK_CONCURRENCY)
def check(job):
    processor.prototype_check(prototype_id=_prototype(job).pk, check=job.payload.get("check"))


def _admin_url(prototype: Prototype) -> str:
    return settings.SITE_URL.rstrip("/") + reverse("admin:prototypes_prototype_change", args=[prototype.pk])


def _alert(job, prototype: Prototype, *, heading: str, template: str) -> None:
    client = clickup.client_from_settings()
    if client is None:
        raise SkipJob("not configured: CLICKUP_API_TOKEN / CLICKUP_LIST_ID are empty")
    lead = prototype.lead
    reference = f"(Reference: {job.key})"  # closed, so one key is never found inside a longer one

    def create() -> dict:
        if job.attempts > 1:  # an earlier attempt's create may have succeeded with its answer lost
            earlier = client.find_task(
                marker=reference,
                tag=ALERT_TAG,
                created_after_ms=int(job.created_at.timestamp() * 1000) - CLOCK_SKEW_MS,
                created_before_ms=int(timezone.now().timestamp() * 1000) + CLOCK_SKEW_MS,
            )
            if earlier:
                return {"task_id": earlier.id}
        body = render_to_string(
            f"prototypes/alerts/{template}.md",
            {"prototype": prototype, "lead": lead, "admin_url": _admin_url(prototype), "reference": reference},
        )
        name = f"{heading}: {lead.full_name}".strip()
        task = client.create_task(name=name, markdown_content=body, priority=clickup.Priority.HIGH, tags=(ALERT_TAG,))
        return {"task_id": task.id}

    task = jobs.step_once(job, ALERT_STEP, create)
    logger.info("prototype_alert_sent", prototype_id=prototype.pk, task_id=task["task_id"])


@jobs.handler(processor.READY_ALERT_KIND)
def ready_alert(job):
    _alert(job, _prototype(job), heading="Prototype ready", template="ready")


@jobs.handler(processor.FAILED_ALERT_KIND)
def failed_alert(job):
    _alert(job, _prototype(job), heading="Prototype failed", template="failed")


@jobs.handler(processor.READY_NOTE_KIND)
def ready_note(job):
    prototype = _prototype(job)
    client = pipedrive.client_from_settings()
    if client is None:
        raise SkipJob("not configured: PIPEDRIVE_API_TOKEN is empty")
    lead_id = prototype.lead.pipedrive_lead_id
    if not lead_id:
        raise TransientError("the lead is not in Pipedrive yet")
    reference = job.key
    if job.attempts > 1 and client.find_note_on_lead(lead_id=lead_id, marker=f"Reference: {reference}"):
        return  # an earlier attempt added it; its answer was lost
    content = render_to_string(
        "prototypes/ready_note.html", {"prototype": prototype, "lead": prototype.lead, "reference": reference}
    )
    client.add_note_to_lead(lead_id=lead_id, content=content)


@jobs.handler(processor.READY_EMAIL_KIND)
def ready_email(job):
    prototype = _prototype(job)
    lead = prototype.lead
    context = {
        "lead": lead,
        "prototype": prototype,
        "progress_url": settings.SITE_URL.rstrip("/") + reverse("prototype-page", args=[lead.public_id]),
    }
    bcc = [lead.pipedrive_cc_email] if lead.pipedrive_cc_email else []
    message = EmailMultiAlternatives(
        subject="Your prototype is ready",
        body=render_to_string("emails/prototype_ready.txt", context),
        to=[lead.email],
        bcc=bcc,
    )
    message.attach_alternative(render_to_string("emails/prototype_ready.html", context), "text/html")
    send_message_once(job, message)
