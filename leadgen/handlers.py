"""Job handlers of web-form leads: Pipedrive, confirmation and decline emails, the sales alert.

Each one loads the lead, is safe to run again (the job may be retried after a
partial success, or after a call that succeeded upstream but whose answer was
lost) and leaves retry decisions to the job layer. Before creating anything
again, a retry finds what an earlier attempt created: Pipedrive ids are saved
step by step and the lead and note are looked up by our marker; the ClickUp
task id is saved and, on a retry, the task is looked up by the lead's admin
link; an email carries a Message-ID derived from its job key, its send is
recorded the moment it returns, and a retry asks Mailgun whether it accepted
that Message-ID already. What they record on the lead, leadgen.services writes.
"""

from urllib.parse import quote

import structlog
from django.conf import settings
from django.core.cache import cache
from django.core.mail import EmailMultiAlternatives
from django.template.loader import render_to_string
from django.urls import reverse

import jobs
from integrations.clickup import client as clickup
from integrations.mail import send_message_once
from integrations.pipedrive import client as pipedrive
from jobs import PermanentError, SkipJob, TransientError
from leadgen import previews, services
from leadgen.models import Lead
from leadgen.routing import route_for
from prototypes import processor as prototype_processor

logger = structlog.get_logger(__name__)

SMART_BCC_CACHE_KEY = "pipedrive:smart_bcc"
SMART_BCC_CACHE_SECONDS = 24 * 3600
ALERT_TAG = "lead-alert"
CLOCK_SKEW_MS = 10_000  # between our clock and ClickUp's


def _lead(job) -> Lead:
    try:
        return Lead.objects.get(pk=job.payload["lead_id"])
    except Lead.DoesNotExist as exc:
        raise PermanentError("the lead no longer exists") from exc


def _steps_for_display(lead: Lead) -> list[tuple[str, str]]:
    return [(q, ", ".join(a) if isinstance(a, list) else str(a)) for q, a in lead.steps.items()]


@jobs.handler("leadgen.pipedrive_sync")
def pipedrive_sync(job):
    """Person and organization (found or created), then the lead; ids are saved as soon as known."""
    lead = _lead(job)
    client = pipedrive.client_from_settings()
    if client is None:
        services.lead_pipedrive_skipped(lead=lead)
        raise SkipJob("not configured: PIPEDRIVE_API_TOKEN is empty")
    try:
        _pipedrive_deliver(client, lead, retry=job.attempts > 1)
    except (TransientError, PermanentError) as exc:
        if isinstance(exc, PermanentError) or job.attempts >= job.max_attempts:
            services.lead_pipedrive_failed(lead=lead)
        raise


def pipedrive_origin_id(lead: Lead) -> str:
    """Our lead's mark on its Pipedrive lead (the lead's `origin_id`) and note."""
    return f"leadgen-lead-{lead.pk}"


def _pipedrive_deliver(client, lead: Lead, *, retry: bool) -> None:
    if lead.pipedrive_lead_id:
        return  # created by an earlier attempt whose note job is already queued
    name = lead.full_name or lead.email
    org_id = lead.pipedrive_org_id
    if org_id is None and lead.company:
        org_id = client.find_or_create_organization(name=lead.company)
        services.lead_pipedrive_org_saved(lead=lead, org_id=org_id)
    person_id = lead.pipedrive_person_id or client.find_or_create_person(
        name=name, email=lead.email, phone=lead.phone or None, org_id=org_id
    )
    services.lead_pipedrive_person_saved(lead=lead, person_id=person_id)
    route = route_for(lead.service_type)
    origin_id = pipedrive_origin_id(lead)
    created = (
        retry and client.find_lead(origin_id=origin_id, person_id=person_id, organization_id=org_id)
    ) or client.create_lead(
        title=f"{route.label}: {name}", origin_id=origin_id, person_id=person_id, organization_id=org_id
    )
    services.lead_pipedrive_synced(lead=lead, pipedrive_lead_id=created.id, cc_email=created.cc_email or "")


@jobs.handler("leadgen.pipedrive_note")
def pipedrive_note(job):
    lead = _lead(job)
    client = pipedrive.client_from_settings()
    if client is None:
        raise SkipJob("not configured: PIPEDRIVE_API_TOKEN is empty")
    marker = pipedrive_origin_id(lead)
    if job.attempts > 1 and client.find_note_on_lead(lead_id=lead.pipedrive_lead_id, marker=marker):
        return  # an earlier attempt added it; its answer was lost
    content = render_to_string(
        f"leadgen/notes/{route_for(lead.service_type).note_template}.html",
        {"lead": lead, "steps": _steps_for_display(lead), "reference": marker},
    )
    client.add_note_to_lead(lead_id=lead.pipedrive_lead_id, content=content)


def _smart_bcc(lead: Lead) -> list[str]:
    """The lead's own Smart BCC address, else the company-wide one, so Pipedrive logs our email."""
    if lead.pipedrive_cc_email:
        return [lead.pipedrive_cc_email]
    client = pipedrive.client_from_settings()
    if client is None:
        return []
    address = cache.get(SMART_BCC_CACHE_KEY)
    if address is None:
        address = client.smart_bcc_address()
        cache.set(SMART_BCC_CACHE_KEY, address, SMART_BCC_CACHE_SECONDS)
    return [address]


def _send_lead_email(job, lead: Lead, *, template: str, subject: str, bcc: list[str]) -> None:
    context = {"lead": lead, "site_url": settings.SITE_URL}
    message = EmailMultiAlternatives(
        subject=subject, body=render_to_string(f"emails/{template}.txt", context), to=[lead.email], bcc=bcc
    )
    message.attach_alternative(render_to_string(f"emails/{template}.html", context), "text/html")
    send_message_once(job, message)


@jobs.handler("leadgen.confirmation_email")
def confirmation_email(job):
    lead = _lead(job)
    route = route_for(lead.service_type)
    _send_lead_email(job, lead, template=route.email_template, subject=route.email_subject, bcc=_smart_bcc(lead))


@jobs.handler("leadgen.vendor_decline_email")
def vendor_decline_email(job):
    # Not copied to Pipedrive: vendors are not contacts of ours.
    _send_lead_email(job, _lead(job), template="vendor_decline", subject="Thank you for reaching out", bcc=[])


def _alert_created_earlier(client, lead: Lead, admin_url: str):
    """The task the last create call made, if it did: a create whose answer was lost is looked for among
    the tasks created from a little before it started until its longest possible wait was over."""
    started_ms = int(lead.clickup_create_started_at.timestamp() * 1000)
    longest_wait_ms = int((settings.HTTP_CONNECT_TIMEOUT + settings.HTTP_READ_TIMEOUT) * 1000) + CLOCK_SKEW_MS
    return client.find_task(
        marker=admin_url,
        tag=ALERT_TAG,
        created_after_ms=started_ms - CLOCK_SKEW_MS,
        created_before_ms=started_ms + longest_wait_ms,
    )


def whatsapp_url(phone: str) -> str:
    """wa.me takes the number in international format, digits only."""
    return f"https://wa.me/{quote(''.join(ch for ch in phone if ch.isdigit()))}" if phone else ""


@jobs.handler("leadgen.lead_alert")
def lead_alert(job):
    """Tell sales at once. Only an alert: the follow-up cadence is owned elsewhere."""
    lead = _lead(job)
    client = clickup.client_from_settings()
    if client is None:
        raise SkipJob("not configured: CLICKUP_API_TOKEN / CLICKUP_LIST_ID are empty")
    if lead.clickup_task_id:
        return  # created by an earlier attempt whose finish was not recorded
    route = route_for(lead.service_type)
    admin_url = settings.SITE_URL.rstrip("/") + reverse("admin:leadgen_lead_change", args=[lead.pk])
    task = job.attempts > 1 and lead.clickup_create_started_at and _alert_created_earlier(client, lead, admin_url)
    if not task:
        body = render_to_string(
            "leadgen/alerts/lead_alert.md",
            {
                "lead": lead,
                "visitor": {  # what the visitor typed, escaped for Markdown
                    field: clickup.markdown_text(getattr(lead, field))
                    for field in ("first_name", "last_name", "company", "source_page", "email", "phone")
                },
                "message_block": clickup.markdown_block(lead.message[:1500]) if lead.message else "",
                "route": route,
                "whatsapp_url": whatsapp_url(lead.phone),
                "admin_url": admin_url,
            },
        )
        name = f"{route.alert_heading}: {lead.full_name}".strip()
        # Saved first: a retry looks for the task only around the time of the last create call.
        services.lead_alert_starting(lead=lead)
        task = client.create_task(name=name, markdown_content=body, priority=clickup.Priority.URGENT, tags=(ALERT_TAG,))
    services.lead_alert_created(lead=lead, task_id=task.id)
    logger.info("lead_alert_sent", lead_id=lead.pk, task_id=task.id)


@jobs.handler(prototype_processor.CHECKED_KIND)
def prototype_checked(job):
    """A check found the lead's prototype unfinished: its rate-limit hold lives on."""
    previews.lead_prototype_renew(lead=_lead(job))


@jobs.handler(prototype_processor.FINISHED_KIND)
@jobs.handler("leadgen.prototype_settle")  # the kind's earlier name: its jobs still queued run here too
def prototype_finished(job):
    """The lead's prototype ended: completed, its preview saved on the lead and both buckets' quota consumed
    once (keyed by the prototype, however often this runs); anything else only drops the hold."""
    lead = _lead(job)
    completed = job.payload["completed"]
    if completed and job.payload.get("preview_url"):
        previews.lead_preview_set(lead=lead, url=job.payload["preview_url"])
    counted = previews.lead_prototype_settle(
        lead=lead, completed=completed, once_key=f"prototype:{job.payload['prototype_id']}"
    )
    logger.info("prototype_quota_settled", lead_id=lead.pk, completed=completed, counted=counted)
