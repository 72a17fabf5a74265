"""Intake of inbound leads: the web form's submissions (reCAPTCHA, the prototype quota's hold, classification)
and the leads platforms send (sources/), checked by the web form's rules. Saving a lead and what it sets off
are leadgen.services'."""

import functools
from dataclasses import dataclass

import structlog
from django.conf import settings
from django.db import transaction

from integrations.recaptcha import client as recaptcha
from leadgen import services
from leadgen.idempotency import idempotency_owner
from leadgen.models import Lead
from leadgen.ratelimit import prototype_buckets_hold, prototype_buckets_release
from leadgen.routing import is_prototype_eligible
from leadgen.rules import Classification
from leadgen.serializers import MAX_STEP_KEY, MAX_STEP_TEXT, MAX_STEPS, LeadInputSerializer
from prototypes import processor as prototype_processor

logger = structlog.get_logger(__name__)

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
    owner = idempotency_owner(**reservation) if holds_prototype and reservation else ""
    if holds_prototype and (refusal := prototype_buckets_hold(email=fields["email"], ip=client_ip, owner=owner)):
        raise IntakeRefused(
            code=refusal.code,
            message="A prototype is already being prepared for you."
            if refusal.code == "prototype_in_progress"
            else "You have reached the number of prototypes we can prepare for now.",
            status=429,
            retry_after=refusal.retry_after,
        )
    try:
        classification = _classify(fields)
        lead = services.lead_create(
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
        prototype_processor.prototype_start(lead_id=lead.pk)
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
    classification = _classify(values)
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
        lead = services.lead_save(fields=received.fields, classification=received.classification, channel=channel,
                                  store_id=store_id, is_test=is_test, send_emails=send_confirmation)  # fmt: skip
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


def _classify(fields: dict):
    """The classifier's verdict on a lead's fields (the web form's and a platform's alike)."""
    return services.lead_classify(
        email=fields["email"],
        message=fields.get("message", ""),
        company=fields.get("company", ""),
        name=f"{fields.get('first_name', '')} {fields.get('last_name', '')}".strip(),
        service_type=fields.get("service_type", ""),
    )
