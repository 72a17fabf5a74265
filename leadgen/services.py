"""Writes for inbound leads: intake of the web form, classification, fan-out of side effects."""

from dataclasses import dataclass
from datetime import timedelta

import structlog
from django.conf import settings
from django.db import transaction
from django.utils import timezone

import jobs
from integrations import llm, recaptcha
from jobs.models import Job
from jobs.services import jobs_replay
from leadgen.models import Lead
from leadgen.ratelimit import prototype_buckets_hold, prototype_buckets_release
from leadgen.routing import is_prototype_eligible
from leadgen.rules import Classification, classify_by_rules

logger = structlog.get_logger(__name__)


@dataclass
class IntakeRefused(Exception):
    """A submission we answer with a 4xx and do not save."""

    code: str
    message: str
    status: int = 400
    retry_after: int | None = None


def lead_classify(
    *, email: str, message: str, company: str = "", name: str = "", service_type: str = ""
) -> Classification:
    """Ask the LLM; when it is not configured, fails, is slow or answers nonsense, the rules decide."""
    classifier = llm.client_from_settings()
    answer = classifier and classifier.classify_submission(
        {"email": email, "message": message, "company": company, "name": name, "service_type": service_type}
    )
    if answer:
        return Classification(answer.category, answer.confidence, answer.reasoning, Lead.Classifier.LLM)
    return classify_by_rules(email=email, message=message, company=company, name=name)


def status_for(category: str) -> str:
    """The filters can be switched off: then spam or vendor submissions are handled as leads."""
    if category == Lead.Status.SPAM and settings.LEADS_SPAM_FILTER_ENABLED:
        return Lead.Status.SPAM
    if category == Lead.Status.VENDOR and settings.LEADS_VENDOR_FILTER_ENABLED:
        return Lead.Status.VENDOR
    return Lead.Status.LEAD


def lead_intake(*, fields: dict, client_ip: str | None, trusted_chat: bool, recaptcha_token: str) -> Lead:
    """Qualify a web-form submission and save it with its side effects queued, or refuse it."""
    if not trusted_chat and not settings.DEBUG:
        _recaptcha_check(recaptcha_token, client_ip=client_ip)

    holds_prototype = is_prototype_eligible(fields.get("service_type", ""))
    if holds_prototype and (refusal := prototype_buckets_hold(email=fields["email"], ip=client_ip)):
        raise IntakeRefused(
            code=refusal.code,
            message="A prototype is already being prepared for you."
            if refusal.code == "prototype_in_progress"
            else "You have reached the number of prototypes we can prepare for now.",
            status=429,
            retry_after=refusal.retry_after,
        )
    try:
        classification = lead_classify(
            email=fields["email"],
            message=fields.get("message", ""),
            company=fields.get("company", ""),
            name=f"{fields.get('first_name', '')} {fields.get('last_name', '')}".strip(),
            service_type=fields.get("service_type", ""),
        )
        lead = lead_create(fields=fields, client_ip=client_ip, classification=classification)
    except BaseException:
        if holds_prototype:
            prototype_buckets_release(email=fields["email"], ip=client_ip)
        raise
    if holds_prototype and lead.status != Lead.Status.LEAD:
        prototype_buckets_release(email=fields["email"], ip=client_ip)
    logger.info("lead_received", lead_id=lead.pk, status=lead.status, classified_by=lead.classified_by)
    return lead


def _recaptcha_check(token: str, *, client_ip: str | None) -> None:
    client = recaptcha.client_from_settings()
    if client is None:
        return  # not configured (RECAPTCHA_SECRET_KEY unset): like every integration, off until set
    if not token:
        raise IntakeRefused(code="recaptcha_missing", message="The reCAPTCHA token is missing.")
    result = client.verify(
        token,
        remote_ip=client_ip,
        expected_action=settings.RECAPTCHA_ACTION,
        min_score=settings.RECAPTCHA_MIN_SCORE,
        expected_hostnames=settings.RECAPTCHA_HOSTNAMES or settings.ALLOWED_HOSTS,
    )
    if not result.ok:
        raise IntakeRefused(code=result.error_code, message="We could not verify that you are not a robot.")


@transaction.atomic
def lead_create(*, fields: dict, client_ip: str | None, classification: Classification) -> Lead:
    status = status_for(classification.category)
    lead = Lead.objects.create(
        channel=Lead.Channel.WEB_FORM,
        client_ip=client_ip,
        status=status,
        # Set here so the fan-out needs no second write: a lead goes to Pipedrive from the start.
        pipedrive_state=Lead.PipedriveState.PENDING if status == Lead.Status.LEAD else Lead.PipedriveState.NOT_SENT,
        category=classification.category,
        confidence=classification.confidence,
        reasoning=classification.reasoning,
        classified_by=classification.classified_by,
        **fields,
    )
    lead_fan_out(lead=lead)
    return lead


def lead_fan_out(*, lead: Lead) -> None:
    """Queue what a lead of this status sets off. Keys are per lead, so calling it again adds nothing.

    All of a lead's jobs go in one INSERT and one run message (jobs.enqueue_many);
    the alert first, since one worker runs a batch in order.
    """
    specs = []
    if lead.status == Lead.Status.VENDOR:
        specs.append(_lead_job("leadgen.vendor_decline_email", lead))
    if lead.status == Lead.Status.LEAD:
        specs += [
            _lead_job("leadgen.lead_alert", lead),
            _lead_job("leadgen.pipedrive_sync", lead),
            _lead_job(
                "leadgen.confirmation_email",
                lead,
                run_after=lead.created_at + timedelta(seconds=settings.CONFIRMATION_EMAIL_DELAY),
            ),
        ]
    if specs:
        jobs.enqueue_many(specs)
    if lead.status == Lead.Status.LEAD and lead.pipedrive_state == Lead.PipedriveState.NOT_SENT:
        Lead.objects.filter(pk=lead.pk).update(pipedrive_state=Lead.PipedriveState.PENDING)
        lead.pipedrive_state = Lead.PipedriveState.PENDING


def _lead_job(kind: str, lead: Lead, *, run_after=None) -> jobs.JobSpec:
    return jobs.JobSpec(kind, {"lead_id": lead.pk}, key=lead.job_key(kind), run_after=run_after)


@transaction.atomic
def lead_reclassify(*, lead: Lead, dry_run: bool = False) -> tuple[str, str]:
    """Classify again; a lead that becomes a real lead gets the side effects it missed. Returns (old, new) status."""
    classification = lead_classify(
        email=lead.email,
        message=lead.message,
        company=lead.company,
        name=f"{lead.first_name} {lead.last_name}".strip(),
        service_type=lead.service_type,
    )
    old_status, new_status = lead.status, status_for(classification.category)
    if dry_run:
        return old_status, new_status
    lead.status = new_status
    lead.category = classification.category
    lead.confidence = classification.confidence
    lead.reasoning = classification.reasoning
    lead.classified_by = classification.classified_by
    lead.save(update_fields=["status", "category", "confidence", "reasoning", "classified_by", "updated_at"])
    lead_fan_out(lead=lead)
    return old_status, new_status


@transaction.atomic
def lead_resync_pipedrive(*, lead: Lead, actor: str) -> bool:
    """Send a lead to Pipedrive again after a failure. True when this call queued something new."""
    if lead.status != Lead.Status.LEAD or lead.pipedrive_state == Lead.PipedriveState.SYNCED:
        return False
    key = lead.job_key("leadgen.pipedrive_sync")
    existing = Job.objects.filter(key=key).first()
    if existing is None:
        jobs.enqueue("leadgen.pipedrive_sync", {"lead_id": lead.pk}, key=key)
    elif existing.status not in (Job.Status.DEAD, Job.Status.SKIPPED) or not jobs_replay(
        job_ids=[existing.pk], actor=actor
    ):
        return False  # already on its way (or done)
    Lead.objects.filter(pk=lead.pk).update(pipedrive_state=Lead.PipedriveState.PENDING, updated_at=timezone.now())
    return True
