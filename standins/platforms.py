"""Requests as each inbound lead platform sends them: the body bytes and the headers, signed its way.

Each builder returns a PlatformRequest to POST to a source's webhook URL. The defaults make a complete
lead with fresh ids, so two calls are two leads; pass an id again to send what a platform's retry sends.
The person in every default is the same made-up one (PERSON).
"""

import base64
import hashlib
import hmac
import json
import secrets
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from standardwebhooks import Webhook

PERSON = {
    "first_name": "Ada",
    "last_name": "Lovelace",
    "email": "ada@example.com",
    "phone": "+442079460958",
    "company": "Analytical Engines Ltd",
    "message": "We need help automating our invoicing.",
}
FULL_NAME = f"{PERSON['first_name']} {PERSON['last_name']}"


@dataclass(frozen=True)
class PlatformRequest:
    body: bytes
    headers: dict[str, str]

    def json(self):
        return json.loads(self.body)


def numeric_id() -> str:
    """A fresh id shaped as Graph's (a string of 15 digits)."""
    return str(10**14 + secrets.randbelow(9 * 10**14))


def standard_webhooks_secret() -> str:
    """A fresh Standard Webhooks secret, `whsec_` and base64 of 32 random bytes, as senders show them."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


def _compact(document) -> bytes:
    return json.dumps(document, separators=(",", ":")).encode()


def _hmac_sha256(secret: str, message: bytes) -> bytes:
    return hmac.new(secret.encode(), message, hashlib.sha256).digest()


# --- Facebook Lead Ads -----------------------------------------------------------------------


def facebook_leadgen(
    *,
    app_secret: str,
    leadgen_ids: Sequence[str] | None = None,
    page_id: str = "109876543210987",
    form_id: str = "555555555555555",
    ad_id: str = "666666666666666",
    adgroup_id: str = "777777777777777",
    created_time: int | None = None,
) -> PlatformRequest:
    """A Page webhook notification with one `leadgen` change per leadgen id (one fresh id by default)."""
    # Graph API Webhooks, Page object, `leadgen` field ("Webhooks for Lead Ads"): ids only, no answers;
    # X-Hub-Signature-256 is "sha256=" + hex HMAC-SHA256 of the raw body with the app secret.
    sent = int(created_time if created_time is not None else time.time())
    changes = [
        {
            "field": "leadgen",
            "value": {
                "ad_id": ad_id,
                "form_id": form_id,
                "leadgen_id": leadgen_id,
                "created_time": sent,
                "page_id": page_id,
                "adgroup_id": adgroup_id,
            },
        }
        for leadgen_id in (leadgen_ids if leadgen_ids is not None else [numeric_id()])
    ]
    body = _compact({"object": "page", "entry": [{"id": page_id, "time": sent, "changes": changes}]})
    return PlatformRequest(
        body=body,
        headers={
            "Content-Type": "application/json",
            "User-Agent": "facebookexternalua",
            "X-Hub-Signature": "sha1=" + hmac.new(app_secret.encode(), body, hashlib.sha1).hexdigest(),
            "X-Hub-Signature-256": "sha256=" + _hmac_sha256(app_secret, body).hex(),
        },
    )


def facebook_verification(*, verify_token: str, challenge: str = "1158201444") -> dict[str, str]:
    """The query of Facebook's subscription GET to the webhook URL."""
    # Graph API Webhooks, "Verification Requests": hub.mode=subscribe, hub.challenge (an int), hub.verify_token.
    return {"hub.mode": "subscribe", "hub.challenge": challenge, "hub.verify_token": verify_token}


# --- Google Ads lead forms -------------------------------------------------------------------

# The column names Google shows for its standard questions; a custom question's is its text.
GOOGLE_COLUMN_NAMES = {
    "FULL_NAME": "Full Name",
    "FIRST_NAME": "First Name",
    "LAST_NAME": "Last Name",
    "EMAIL": "User Email",
    "WORK_EMAIL": "Work Email",
    "PHONE_NUMBER": "User Phone",
    "WORK_PHONE": "Work Phone",
    "COMPANY_NAME": "Company Name",
    "JOB_TITLE": "Job Title",
    "POSTAL_CODE": "Postal Code",
}


def google_ads_lead(
    *,
    google_key: str,
    lead_id: str | None = None,
    columns: Mapping[str, str] | None = None,
    is_test: bool = False,
    form_id: int = 123456789,
    campaign_id: int = 987654321,
    adgroup_id: int = 20000000000,
    creative_id: int = 30000000000,
    gcl_id: str | None = None,
) -> PlatformRequest:
    """A lead form webhook POST; `columns` is column_id → the person's answer (FULL_NAME, EMAIL, …)."""
    # Google Ads lead form webhook, "Implementation" (WebhookLead): lead_id, user_column_data of
    # column_name/string_value/column_id, api_version, int64 ids, google_key in the body, is_test, gcl_id.
    answered = (
        columns
        if columns is not None
        else {
            "FULL_NAME": FULL_NAME,
            "EMAIL": PERSON["email"],
            "PHONE_NUMBER": PERSON["phone"],
            "COMPANY_NAME": PERSON["company"],
        }
    )
    document = {
        "lead_id": lead_id or secrets.token_urlsafe(32),
        "user_column_data": [
            {
                "column_name": GOOGLE_COLUMN_NAMES.get(column_id, column_id),
                "string_value": value,
                "column_id": column_id,
            }
            for column_id, value in answered.items()
        ],
        "api_version": "1.0",
        "form_id": form_id,
        "campaign_id": campaign_id,
        "google_key": google_key,
        "is_test": is_test,
        "gcl_id": gcl_id or secrets.token_urlsafe(48),
        "adgroup_id": adgroup_id,
        "creative_id": creative_id,
    }
    return PlatformRequest(body=_compact(document), headers={"Content-Type": "application/json"})


# --- Typeform --------------------------------------------------------------------------------

# Each answer type and the question type that gives it.
_TYPEFORM_QUESTION_TYPES = {
    "text": "short_text",
    "email": "email",
    "phone_number": "phone_number",
    "choice": "multiple_choice",
    "choices": "multiple_choice",
    "number": "number",
    "boolean": "yes_no",
    "date": "date",
    "url": "website",
}


def typeform_answer(ref: str, answer_type: str, value) -> dict:
    """One item of `form_response.answers`: `choice` takes a label, `choices` a list of labels."""
    # Typeform webhooks, "Example webhook payload": the value sits under the key the answer's type names.
    if answer_type == "choice":
        value = {"id": _typeform_id(value), "label": value, "ref": str(uuid.uuid5(uuid.NAMESPACE_URL, value))}
    elif answer_type == "choices":
        value = {"ids": [_typeform_id(label) for label in value], "labels": list(value)}
    question = {"id": _typeform_id(ref), "type": _TYPEFORM_QUESTION_TYPES.get(answer_type, "short_text"), "ref": ref}
    return {"type": answer_type, answer_type: value, "field": question}


def _typeform_id(seed: str) -> str:
    return hashlib.sha256(seed.encode()).hexdigest()[:12]


def typeform_response(
    *,
    secret: str,
    answers: Sequence[dict] | None = None,
    token: str | None = None,
    form_id: str = "lT4Z3j",
    hidden: Mapping[str, str] | None = None,
    event_type: str = "form_response",
) -> PlatformRequest:
    """A form_response webhook; `answers` are typeform_answer items (by default the person, by our refs)."""
    # Typeform webhooks, "Example webhook payload" and "Secure your webhooks": form_response with token,
    # definition and answers; Typeform-Signature is "sha256=" + base64 HMAC-SHA256 of the raw body.
    answers = list(
        answers
        if answers is not None
        else [
            typeform_answer("first_name", "text", PERSON["first_name"]),
            typeform_answer("last_name", "text", PERSON["last_name"]),
            typeform_answer("email", "email", PERSON["email"]),
            typeform_answer("phone", "phone_number", PERSON["phone"]),
            typeform_answer("company", "text", PERSON["company"]),
            typeform_answer("message", "text", PERSON["message"]),
        ]
    )
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    document = {
        "event_id": secrets.token_hex(13).upper(),
        "event_type": event_type,
        "form_response": {
            "form_id": form_id,
            "token": token or secrets.token_hex(16),
            "landed_at": now,
            "submitted_at": now,
            "hidden": dict(hidden or {}),
            "definition": {
                "id": form_id,
                "title": "Contact us",
                "fields": [{**answer["field"], "title": answer["field"]["ref"]} for answer in answers],
            },
            "answers": answers,
        },
    }
    body = _compact(document)
    signature = "sha256=" + base64.b64encode(_hmac_sha256(secret, body)).decode()
    return PlatformRequest(
        body=body,
        headers={
            "Content-Type": "application/json",
            "User-Agent": "Typeform Webhooks",
            "Typeform-Signature": signature,
        },
    )


# --- Webflow ---------------------------------------------------------------------------------


def webflow_form_submission(
    *,
    secret: str,
    data: Mapping | None = None,
    submission_id: str | None = None,
    form_name: str = "Contact Us",
    site_id: str = "65427cf400e02b306eaa049c",
    form_id: str = "65429eadebe8a9f3a30f62d0",
    timestamp_ms: int | None = None,
) -> PlatformRequest:
    """A form_submission webhook; `data` is field name → value (by default the person, by our field names)."""
    # Webflow Data API v2, "Working with webhooks" and the form_submission event: triggerType, payload
    # (name, siteId, data, schema, submittedAt, id, formId, formElementId); x-webflow-signature is hex
    # HMAC-SHA256 of "{x-webflow-timestamp}:{raw body}".
    fields = (
        dict(data)
        if data is not None
        else {
            "Name": FULL_NAME,
            "Email": PERSON["email"],
            "Phone": PERSON["phone"],
            "Company": PERSON["company"],
            "Message": PERSON["message"],
        }
    )
    sent = timestamp_ms if timestamp_ms is not None else int(time.time() * 1000)
    document = {
        "triggerType": "form_submission",
        "payload": {
            "name": form_name,
            "siteId": site_id,
            "data": fields,
            "schema": [
                {
                    "fieldName": name,
                    "fieldType": "FormTextarea" if name == "Message" else "FormTextInput",
                    "fieldElementId": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{form_id}/{name}")),
                }
                for name in fields
            ],
            "submittedAt": datetime.fromtimestamp(sent / 1000, UTC).isoformat(timespec="milliseconds"),
            "id": submission_id or secrets.token_hex(12),
            "formId": form_id,
            "formElementId": str(uuid.uuid5(uuid.NAMESPACE_URL, form_id)),
        },
    }
    body = _compact(document)
    return PlatformRequest(
        body=body,
        headers={
            "Content-Type": "application/json",
            "x-webflow-timestamp": str(sent),
            "x-webflow-signature": _hmac_sha256(secret, f"{sent}:".encode() + body).hex(),
        },
    )


# --- Generic JSON (Standard Webhooks) --------------------------------------------------------


def generic_webhook(
    *,
    secret: str,
    payload: Mapping | None = None,
    webhook_id: str | None = None,
    timestamp: int | None = None,
) -> PlatformRequest:
    """Any JSON object, signed per Standard Webhooks with a `whsec_…` secret (by default the person, flat)."""
    # Standard Webhooks: webhook-id, webhook-timestamp (Unix seconds), webhook-signature "v1,<base64>",
    # computed by the spec's own library.
    body = _compact(dict(payload) if payload is not None else {**PERSON})
    message_id = webhook_id or f"msg_{uuid.uuid4().hex}"
    sent = timestamp if timestamp is not None else int(time.time())
    signature = Webhook(secret).sign(message_id, datetime.fromtimestamp(sent, UTC), body.decode())
    return PlatformRequest(
        body=body,
        headers={
            "Content-Type": "application/json",
            "webhook-id": message_id,
            "webhook-timestamp": str(sent),
            "webhook-signature": signature,
        },
    )
