"""Writes for inbound leads: intake of the web form and of leads platforms send (sources/), classification,
fan-out of side effects, and the upsert of leads captured from notification emails (the poller in tracking/
parses, this writes)."""

import functools
from dataclasses import dataclass
from datetime import timedelta

import structlog
from django.conf import settings
from django.db import transaction
from django.utils import timezone

import jobs
from chat import services as chat_services
from foundation.db import insert_on_conflict, update_many
from integrations import llm, recaptcha
from leadgen import selectors
from leadgen.idempotency import idempotency_lead_saved
from leadgen.models import Lead
from leadgen.ratelimit import (
    prototype_buckets_consume,
    prototype_buckets_extend,
    prototype_buckets_hold,
    prototype_buckets_release,
)
from leadgen.routing import is_prototype_eligible
from leadgen.rules import Classification, classify_by_rules
from leadgen.serializers import MAX_STEP_KEY, MAX_STEP_TEXT, MAX_STEPS, LeadInputSerializer

logger = structlog.get_logger(__name__)

# "A lead arrived": the job a qualified lead of the web form (chat-created ones included) or of a platform sets
# off so that it joins its contact and opens an outreach task. leadgen owns the kind; crm registers its handler
# (leadgen sits below crm and never imports it). Email leads emit crm's LeadCreated from their capture instead.
LEAD_ARRIVED = "leadgen.lead_arrived"
# Leads a platform sends (sources/): their people are emailed only when their source says so.
RECEIVED_CHANNELS = frozenset(
    {Lead.Channel.FACEBOOK, Lead.Channel.GOOGLE_ADS, Lead.Channel.TYPEFORM, Lead.Channel.WEBFLOW, Lead.Channel.WEBHOOK}
)
# The lead fields a platform's lead may give, each checked as the web form's field of that source.
RECEIVED_FIELDS = (
    "first_name", "last_name", "email", "phone", "company", "message", "service_type", "source_page", "utm", "steps",
)  # fmt: skip


class LeadInvalid(Exception):
    """A received lead whose fields break the web form's rules; `fields`: Lead field name → messages."""

    def __init__(self, fields: dict):
        super().__init__("The lead's fields are invalid.")
        self.fields = fields


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


def lead_intake(
    *,
    fields: dict,
    client_ip: str | None,
    trusted_chat: bool,
    recaptcha_token: str,
    chat_session_id: str = "",
    reservation: dict | None = None,
) -> Lead:
    """Qualify a web-form submission and save it with its side effects queued, or refuse it.

    `chat_session_id` (trusted chat only): the conversation that produced the lead, linked in the same transaction.
    `reservation`: the request's Idempotency-Key (scope, caller, key), marked saved in the same transaction.
    """
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
        lead = lead_create(
            fields=fields,
            client_ip=client_ip,
            classification=classification,
            chat_session_id=chat_session_id,
            reservation=reservation,
        )
    except BaseException:
        if holds_prototype:
            prototype_buckets_release(email=fields["email"], ip=client_ip)
        raise
    if holds_prototype and lead.status != Lead.Status.LEAD:
        prototype_buckets_release(email=fields["email"], ip=client_ip)
    elif holds_prototype and trusted_chat:
        # The agent must tell the visitor the truth: the V0 chat is created now, in this request.
        from prototypes.services import prototype_start

        prototype_start(lead=lead)
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


@dataclass(frozen=True)
class ReceivedLead:
    """A lead a platform sent, checked and classified, not saved yet (lead_receive_save saves it)."""

    fields: dict
    classification: Classification


def lead_receive_check(*, fields: dict) -> ReceivedLead:
    """Check a lead a platform sent as the web form's are checked (the same field rules and classifier), or
    raise LeadInvalid. Touches no row: called before the caller's transaction opens, so that no transaction
    and no pooled connection is held while the classifier answers.

    `fields`: Lead field values (RECEIVED_FIELDS).
    """
    values = _received_fields_check(fields)
    classification = lead_classify(
        email=values["email"],
        message=values.get("message", ""),
        company=values.get("company", ""),
        name=f"{values.get('first_name', '')} {values.get('last_name', '')}".strip(),
        service_type=values.get("service_type", ""),
    )
    return ReceivedLead(values, classification)


def lead_receive_save(
    *, received: ReceivedLead, channel: str, store_id: int | None, is_test: bool, send_confirmation: bool
) -> Lead:
    """Save a checked lead as the web form's are saved, with its fan-out (emails to the person only with
    `send_confirmation`), never a prototype. A test lead is saved marked and sets nothing off.

    Joins the caller's transaction without a savepoint (a failure here rolls the caller's back whole), or
    runs in its own when there is none.
    """
    with transaction.atomic(savepoint=False):
        lead = _lead_save(fields=received.fields, classification=received.classification, channel=channel,
                          store_id=store_id, is_test=is_test)  # fmt: skip
        lead_fan_out(lead=lead, send_emails=send_confirmation)
        transaction.on_commit(  # not for a lead the caller's transaction rolls back
            lambda: logger.info("lead_received", lead_id=lead.pk, channel=channel, status=lead.status, is_test=is_test)
        )
    return lead


def received_steps(answers: dict[str, str]) -> dict[str, str]:
    """A platform's answers as a lead's steps can hold them: the first MAX_STEPS, names and texts cut to the
    web form's lengths (the whole answers stay in the source's request log)."""
    return {name[:MAX_STEP_KEY]: text[:MAX_STEP_TEXT] for name, text in list(answers.items())[:MAX_STEPS]}


@functools.cache
def received_required_fields() -> frozenset[str]:
    """The fields a received lead cannot be made without: those the web form requires."""
    return frozenset(field.source for field in LeadInputSerializer().fields.values() if field.required)


def _received_fields_check(fields: dict) -> dict:
    """The fields as the web form's serializer reads them (its rules, its normalized values), or LeadInvalid."""
    unknown = set(fields) - set(RECEIVED_FIELDS)
    if unknown:
        raise ValueError(f"not lead fields a platform may give: {sorted(unknown)}")
    input_names = _input_names()
    serializer = LeadInputSerializer(data={input_names[name]: value for name, value in fields.items()})
    if not serializer.is_valid():
        lead_names = {input_name: name for name, input_name in input_names.items()}
        raise LeadInvalid({lead_names.get(name, name): _messages(errors) for name, errors in serializer.errors.items()})
    return dict(serializer.validated_data)


@functools.cache
def _input_names() -> dict[str, str]:
    """Lead field name → the web form's name for it (first_name → firstName)."""
    return {field.source: name for name, field in LeadInputSerializer().fields.items()}


def _messages(errors):
    """DRF's error details as plain JSON: lists of texts, nested where the field is."""
    if isinstance(errors, dict):
        return {str(key): _messages(value) for key, value in errors.items()}
    if isinstance(errors, list):
        return [_messages(item) for item in errors]
    return str(errors)


def _lead_save(*, fields: dict, classification: Classification, is_test: bool = False, **values) -> Lead:
    status = status_for(classification.category)
    delivered = status == Lead.Status.LEAD and not is_test
    return Lead.objects.create(
        status=status,
        is_test=is_test,
        # Set here so the fan-out needs no second write: a lead goes to Pipedrive from the start.
        pipedrive_state=Lead.PipedriveState.PENDING if delivered else Lead.PipedriveState.NOT_SENT,
        category=classification.category,
        confidence=classification.confidence,
        reasoning=classification.reasoning,
        classified_by=classification.classified_by,
        **values,
        **fields,
    )


@transaction.atomic
def lead_create(
    *,
    fields: dict,
    client_ip: str | None,
    classification: Classification,
    chat_session_id: str = "",
    reservation: dict | None = None,
) -> Lead:
    lead = _lead_save(fields=fields, classification=classification, channel=Lead.Channel.WEB_FORM, client_ip=client_ip)
    if reservation:
        idempotency_lead_saved(**reservation, lead_id=lead.pk)
    if chat_session_id:
        chat_services.chat_session_link_lead(session_id=chat_session_id, lead_id=lead.pk)
    lead_fan_out(lead=lead)
    if selectors.lead_gets_prototype(lead=lead):
        from prototypes.services import prototype_open  # prototypes builds on leadgen, not the other way

        prototype_open(lead=lead)
    return lead


def lead_prototype_renew(*, lead: Lead) -> None:
    """The lead's prototype is still being worked on: keep its rate-limit hold."""
    prototype_buckets_extend(email=lead.email, ip=lead.client_ip)


def lead_prototype_settle(*, lead: Lead, completed: bool, once_key: str) -> bool:
    """The lead's prototype ended: completed consumes both buckets' quota (once per `once_key`),
    anything else only drops the hold. Returns whether quota was counted by this call."""
    if completed:
        return prototype_buckets_consume(email=lead.email, ip=lead.client_ip, once_key=once_key)
    prototype_buckets_release(email=lead.email, ip=lead.client_ip)
    return False


def leads_preview_set(*, previews: list[tuple[Lead, str]]) -> None:
    """Each lead's prototype preview URL, in one round trip however many leads."""
    now = timezone.now()
    for lead, url in previews:
        lead.preview_url, lead.updated_at = url, now
    update_many([lead for lead, _ in previews], ["preview_url", "updated_at"])


def lead_fan_out(*, lead: Lead, send_emails: bool | None = None) -> None:
    """Queue what a lead of this status sets off. Keys are per lead, so calling it again adds nothing.

    All of a lead's jobs go in one INSERT and one run message (jobs.enqueue_many);
    the alert first, since one worker runs a batch in order. `send_emails`: whether the person gets our
    emails (confirmation, vendor decline); by default yes, except for a lead a platform sent, whose source
    said so when it arrived (a later fan-out cannot know, so it sends none). A test lead sets off nothing.
    A real lead known by an email or a phone also sets off LEAD_ARRIVED (its contact and outreach task).
    """
    if lead.is_test:
        return
    if send_emails is None:
        send_emails = lead.channel not in RECEIVED_CHANNELS
    specs = []
    if lead.status == Lead.Status.VENDOR and send_emails:
        specs.append(_lead_job("leadgen.vendor_decline_email", lead))
    if lead.status == Lead.Status.LEAD:
        specs.append(_lead_job("leadgen.lead_alert", lead))
        if settings.LEAD_IDENTITY_ENABLED and lead.channel != Lead.Channel.EMAIL and (lead.email or lead.phone):
            specs.append(_lead_job(LEAD_ARRIVED, lead))
        specs.append(_lead_job("leadgen.pipedrive_sync", lead))
        if send_emails:
            delay = timedelta(seconds=settings.CONFIRMATION_EMAIL_DELAY)
            specs.append(_lead_job("leadgen.confirmation_email", lead, run_after=lead.created_at + delay))
    if specs:
        jobs.enqueue_many(specs)
    if lead.status == Lead.Status.LEAD and lead.pipedrive_state == Lead.PipedriveState.NOT_SENT:
        Lead.objects.filter(pk=lead.pk).update(pipedrive_state=Lead.PipedriveState.PENDING)
        lead.pipedrive_state = Lead.PipedriveState.PENDING


def _lead_job(kind: str, lead: Lead, *, run_after=None) -> jobs.JobSpec:
    return jobs.JobSpec(kind, {"lead_id": lead.pk}, key=lead.job_key(kind), run_after=run_after, store_id=lead.store_id)


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


# --- leads captured from notification emails -------------------------------------------------

# Refreshed on a second sighting of the same email lead; everything else stays as first captured.
EMAIL_LEAD_REFRESHED = ("lead_type", "store", "franchise", "account_id", "synced_at", "updated_at")


def email_lead_upsert(*, dedup_key: str, fields: dict, reparse_key: str | None = None) -> tuple[Lead, bool]:
    """Write the lead an email describes, on its dedup key; returns (lead, complete). Runs in the caller's
    transaction, so the caller can emit its events atomically with the write.

    `fields` are Lead field values (texts are cut to their column: an email may carry any length of
    text, and the row keeps what fits rather than failing), with `parse_error` empty when the email
    was understood. Reprocessing the same message any number of times leaves one lead:
    - a new key inserts;
    - a lead kept earlier as a failed parse, now understood, is overwritten with everything;
    - otherwise (a second sighting) the lead type and the store are refreshed. The store is
      forward-only: a known store is never replaced, by null or by another store, because contacts
      and tasks downstream are keyed on it; franchise and account follow it only while it is the same.
    `reparse_key` names where a failed parse of this same message was kept (its key had no phone):
    when no lead has `dedup_key` yet, that failed lead becomes this one.
    """
    fields = _email_lead_fields(fields)
    with transaction.atomic():
        lead = _email_lead_failed(reparse_key, dedup_key) if reparse_key and not fields["parse_error"] else None
        if lead is not None:
            _lead_overwrite(lead, {"dedup_key": dedup_key, **fields})
        else:
            lead = Lead(dedup_key=dedup_key, **fields)
            inserted = insert_on_conflict(lead, on_conflict="ON CONFLICT (dedup_key) DO NOTHING", returning="id")
            if inserted:
                lead.pk, lead._state.adding = inserted[0], False
            else:
                lead = Lead.objects.select_for_update().get(dedup_key=dedup_key)
                if lead.parse_state == Lead.ParseState.FAILED and not fields["parse_error"]:
                    _lead_overwrite(lead, fields)
                else:
                    _email_lead_refresh(lead, fields)
    return lead, lead.parse_state == Lead.ParseState.PARSED


def _email_lead_fields(fields: dict) -> dict:
    fields = {
        name: value[: Lead._meta.get_field(name).max_length] if isinstance(value, str) else value
        for name, value in fields.items()
    }
    fields["channel"] = Lead.Channel.EMAIL
    fields["parse_state"] = Lead.ParseState.FAILED if fields["parse_error"] else Lead.ParseState.PARSED
    return fields


def _email_lead_refresh(lead: Lead, fields: dict) -> None:
    if fields["lead_type"]:
        lead.lead_type = fields["lead_type"]
    store_id = fields.get("store_id")
    if store_id is not None and lead.store_id in (None, store_id):
        lead.store_id, lead.franchise, lead.account_id = store_id, fields["franchise"], fields["account_id"]
    lead.synced_at = fields["synced_at"]
    lead.save(update_fields=EMAIL_LEAD_REFRESHED)


def _lead_overwrite(lead: Lead, fields: dict) -> None:
    for name, value in fields.items():
        setattr(lead, name, value)
    lead.save()


def _email_lead_failed(reparse_key: str, dedup_key: str) -> Lead | None:
    if reparse_key == dedup_key or Lead.objects.filter(dedup_key=dedup_key).exists():
        return None  # the insert below finds it
    return Lead.objects.select_for_update().filter(dedup_key=reparse_key, parse_state=Lead.ParseState.FAILED).first()


# --- data-subject requests (privacy/) ------------------------------------------------------------


def subject_erase(*, lead_ids) -> dict[str, int]:
    """Delete these leads. The apps whose rows point at them erase those first; a row left pointing at one
    (a task) refuses the delete rather than lose track of it. {model label: rows deleted}."""
    return Lead.objects.filter(pk__in=lead_ids).delete()[1]
