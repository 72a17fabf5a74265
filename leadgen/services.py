"""Writes for inbound leads: saving and classifying them, the fan-out of their side effects and their state
changes as those run (the intake that checks them first is leadgen.intake)."""

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

import jobs
from chat import services as chat_services
from integrations.llm import client as llm
from leadgen import selectors
from leadgen.idempotency import idempotency_lead_saved
from leadgen.models import Lead, lead_job_key
from leadgen.rules import Classification, classify_by_rules
from prototypes import services as prototype_services  # leadgen builds on prototypes, never the other way

# "A lead arrived": the job a qualified lead of the web form (chat-created ones included) or of a platform sets
# off so that it joins its contact and opens an outreach task. leadgen owns the kind; crm registers its handler
# (leadgen sits below crm and never imports it). Email leads emit crm's LeadCreated from their capture instead.
LEAD_ARRIVED = "leadgen.lead_arrived"
# Leads a platform sends (sources/): their people are emailed only when their source says so.
RECEIVED_CHANNELS = frozenset(
    {Lead.Channel.FACEBOOK, Lead.Channel.GOOGLE_ADS, Lead.Channel.TYPEFORM, Lead.Channel.WEBFLOW, Lead.Channel.WEBHOOK}
)


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


def lead_save(
    *, fields: dict, classification: Classification, is_test: bool = False, send_emails: bool | None = None, **values
) -> Lead:
    """Insert a classified lead, its status from the classification, with what it sets off (lead_fan_out's jobs,
    `send_emails` as there) in the same statement: the lead and its jobs in one round trip to PostgreSQL
    (jobs.enqueue_many_with_row; bench/intake). A lead's Pipedrive state is PENDING from the start, so that
    lead_fan_out's update has nothing to do for it."""
    status = status_for(classification.category)
    delivered = status == Lead.Status.LEAD and not is_test
    lead = Lead(
        status=status,
        is_test=is_test,
        pipedrive_state=Lead.PipedriveState.PENDING if delivered else Lead.PipedriveState.NOT_SENT,
        category=classification.category,
        confidence=classification.confidence,
        reasoning=classification.reasoning,
        classified_by=classification.classified_by,
        **values,
        **fields,
    )
    jobs.enqueue_many_with_row(lead, lambda: _fan_out_specs(lead, send_emails=send_emails, lead_id=jobs.ROW_ID))
    return lead


@transaction.atomic
def lead_create(
    *,
    fields: dict,
    client_ip: str | None,
    classification: Classification,
    chat_session_id: str = "",
    reservation: dict | None = None,
) -> Lead:
    lead = lead_save(fields=fields, classification=classification, channel=Lead.Channel.WEB_FORM, client_ip=client_ip)
    if reservation:
        idempotency_lead_saved(**reservation, lead_id=lead.pk)
    if chat_session_id:
        chat_services.chat_session_link_lead(session_id=chat_session_id, lead_id=lead.pk)
    if selectors.lead_gets_prototype(lead=lead):
        prototype_services.prototype_open(lead_id=lead.pk)
    return lead


def lead_fan_out(*, lead: Lead, send_emails: bool | None = None) -> None:
    """Queue what a lead of this status sets off. Keys are per lead, so calling it again adds nothing.

    All of a lead's jobs go in one INSERT and one run message (jobs.enqueue_many);
    the alert first, since one worker runs a batch in order. `send_emails`: whether the person gets our
    emails (confirmation, vendor decline); by default yes, except for a lead a platform sent, whose source
    said so when it arrived (a later fan-out cannot know, so it sends none). A test lead sets off nothing.
    A real lead known by an email or a phone also sets off LEAD_ARRIVED (its contact and outreach task).
    """
    if specs := _fan_out_specs(lead, send_emails=send_emails):
        jobs.enqueue_many(specs)
    if lead.status == Lead.Status.LEAD and not lead.is_test and lead.pipedrive_state == Lead.PipedriveState.NOT_SENT:
        Lead.objects.filter(pk=lead.pk).update(pipedrive_state=Lead.PipedriveState.PENDING)
        lead.pipedrive_state = Lead.PipedriveState.PENDING


def _fan_out_specs(lead: Lead, *, send_emails: bool | None = None, lead_id=None) -> list[jobs.JobSpec]:
    """lead_fan_out's jobs. `lead_id`: jobs.ROW_ID for a lead written with them (lead_save)."""
    if lead.is_test:
        return []
    if send_emails is None:
        send_emails = lead.channel not in RECEIVED_CHANNELS
    lead_id = lead.pk if lead_id is None else lead_id
    specs = []
    if lead.status == Lead.Status.VENDOR and send_emails:
        specs.append(_lead_job("leadgen.vendor_decline_email", lead, lead_id))
    if lead.status == Lead.Status.LEAD:
        specs.append(_lead_job("leadgen.lead_alert", lead, lead_id))
        if settings.LEAD_IDENTITY_ENABLED and lead.channel != Lead.Channel.EMAIL and (lead.email or lead.phone):
            specs.append(_lead_job(LEAD_ARRIVED, lead, lead_id))
        specs.append(_lead_job("leadgen.pipedrive_sync", lead, lead_id))
        if send_emails:
            delay = timedelta(seconds=settings.CONFIRMATION_EMAIL_DELAY)
            specs.append(_lead_job("leadgen.confirmation_email", lead, lead_id, run_after=lead.created_at + delay))
    return specs


def _lead_job(kind: str, lead: Lead, lead_id, *, run_after=None) -> jobs.JobSpec:
    return jobs.JobSpec(
        kind, {"lead_id": lead_id}, key=lead_job_key(kind, lead_id), run_after=run_after, store_id=lead.store_id
    )


@transaction.atomic
def lead_reclassify(*, lead: Lead, dry_run: bool = False) -> tuple[str, str]:
    """Classify again; a lead that becomes a real lead gets the side effects it missed. Returns (old, new) status."""
    classification = lead_classify(
        email=lead.email,
        message=lead.message,
        company=lead.company,
        name=lead.full_name,
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
    if lead.is_test or lead.status != Lead.Status.LEAD or lead.pipedrive_state == Lead.PipedriveState.SYNCED:
        return False
    kind = "leadgen.pipedrive_sync"
    payload, key = {"lead_id": lead.pk}, lead.job_key(kind)
    if not jobs.replay_or_enqueue(kind, payload, key=key, actor=actor, store_id=lead.store_id):
        return False  # already on its way (or done)
    Lead.objects.filter(pk=lead.pk).update(pipedrive_state=Lead.PipedriveState.PENDING, updated_at=timezone.now())
    return True


# --- what the lead's jobs record as they run (leadgen/handlers.py) ------------------------------------------------
# Each writes only its own columns, by primary key: the handler's copy of the lead may be older than the row.


def lead_pipedrive_skipped(*, lead: Lead) -> None:
    """Pipedrive is not configured: the lead is not sent."""
    Lead.objects.filter(pk=lead.pk).update(pipedrive_state=Lead.PipedriveState.SKIPPED)


def lead_pipedrive_failed(*, lead: Lead) -> None:
    """The sync gave up (a permanent error, or its last attempt); staff may send it again (lead_resync_pipedrive)."""
    Lead.objects.filter(pk=lead.pk).update(pipedrive_state=Lead.PipedriveState.FAILED)


def lead_pipedrive_org_saved(*, lead: Lead, org_id: int) -> None:
    """Saved as soon as known, so that a retry finds the organization instead of creating it again."""
    Lead.objects.filter(pk=lead.pk).update(pipedrive_org_id=org_id)


def lead_pipedrive_person_saved(*, lead: Lead, person_id: int) -> None:
    """Saved as soon as known, so that a retry finds the person instead of creating it again."""
    Lead.objects.filter(pk=lead.pk).update(pipedrive_person_id=person_id)


@transaction.atomic
def lead_pipedrive_synced(*, lead: Lead, pipedrive_lead_id: str, cc_email: str) -> None:
    """The lead is in Pipedrive: its Pipedrive lead and Smart BCC address, and the note that follows it."""
    Lead.objects.filter(pk=lead.pk).update(
        pipedrive_lead_id=pipedrive_lead_id, pipedrive_cc_email=cc_email, pipedrive_state=Lead.PipedriveState.SYNCED
    )
    kind = "leadgen.pipedrive_note"
    jobs.enqueue(kind, {"lead_id": lead.pk}, key=lead.job_key(kind), store_id=lead.store_id)


def lead_alert_starting(*, lead: Lead) -> None:
    """Recorded before the alert's create call: a retry looks for its task only around the last call's time."""
    Lead.objects.filter(pk=lead.pk).update(clickup_create_started_at=timezone.now())


def lead_alert_created(*, lead: Lead, task_id: str) -> None:
    Lead.objects.filter(pk=lead.pk).update(clickup_task_id=task_id)


# --- data-subject requests (privacy/) ------------------------------------------------------------


def subject_erase(*, lead_ids) -> dict[str, int]:
    """Delete these leads. The apps whose rows point at them erase those first; a row left pointing at one
    (a task) refuses the delete rather than lose track of it. {model label: rows deleted}."""
    return Lead.objects.filter(pk__in=lead_ids).delete()[1]
