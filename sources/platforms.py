"""Each inbound platform's signature check and payload shape: pure functions, no database, no network.

The shapes are the platforms' own documentation:

- Facebook Lead Ads (Graph API webhooks, Page object, `leadgen` field): a POST of `{"object": "page",
  "entry": [{"id", "time", "changes": [{"field": "leadgen", "value": {...}}]}]}` whose values carry ids
  only (leadgen_id, page_id, form_id, ad_id, adgroup_id, created_time), signed with
  `X-Hub-Signature-256: sha256=<hex HMAC-SHA256(app secret, raw body)>`. Subscribing is a GET handshake
  (`hub.mode=subscribe`, `hub.verify_token`, `hub.challenge` to echo). The lead itself is read from the
  Graph API (`field_data: [{"name", "values"}]`, integrations.facebook) by a job.
- Google Ads lead form webhooks: a JSON POST (`lead_id`, `user_column_data: [{"column_id", "string_value",
  "column_name"}]`, `form_id`, `campaign_id`, `is_test`, …) authenticated by the `google_key` the
  advertiser set on the form, which travels in the body.
- Typeform webhooks: `Typeform-Signature: sha256=<base64 HMAC-SHA256(secret, raw body)>`; the answers are
  `form_response.answers[]`, each naming its question by `field.ref` and holding its value under its `type`.
- Webflow (Data API v2 webhooks, `form_submission`): `x-webflow-timestamp` (Unix milliseconds) and
  `x-webflow-signature: <hex HMAC-SHA256(secret, "{timestamp}:{raw body}")>`, refused more than five
  minutes from now; the submission is `payload` (`id`, `data`: field name → value).
- Generic JSON: Standard Webhooks (`webhook-id`, `webhook-timestamp`, `webhook-signature`), checked by the
  `standardwebhooks` library; the `webhook-id` is the submission's id (the same on every retry).

Every comparison is constant-time, and a source without a secret refuses every request.
"""

import base64
import hashlib
import hmac
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache

import jmespath
from jmespath.exceptions import JMESPathError
from rest_framework import exceptions as drf_exceptions
from standardwebhooks.webhooks import EmptyWebhookSecretError, Webhook, WebhookVerificationError

from foundation.db import storable_text
from foundation.parsers import json_body

KINDS = ("facebook", "google_ads", "typeform", "webflow", "generic")
LEAD_FIELDS = ("first_name", "last_name", "email", "phone", "company", "message", "service_type")
# What a mapping may name: the lead's fields, and a full name that fills first and last name when the
# platform has no separate ones.
MAPPED_FIELDS = ("full_name", *LEAD_FIELDS)
PLATFORM_ID_MAX_LENGTH = 255  # InboundLead.platform_id
WEBFLOW_TOLERANCE_SECONDS = 300  # Webflow: a request older than five minutes may be a replay
# Facebook's Lead Ads Testing Tool fills each question with this placeholder; Graph has no test flag.
FACEBOOK_TEST_MARKER = "<test lead:"
# Graph's own fields of a lead, as the job asks for them; none of them is an answer of the person.
FACEBOOK_CONTEXT_FIELDS = ("form_id", "ad_id", "adset_id", "campaign_id", "created_time", "is_organic", "platform")

# Our field → the platform's key for it (a list: the first one present). Facebook and Google name their
# standard questions themselves; Typeform's refs and Webflow's field names are the form owner's choice, so
# these are the names docs/sources.md asks them to use. For generic JSON each value is a JMESPath expression.
DEFAULT_MAPPINGS: dict[str, dict[str, str | list[str]]] = {
    "facebook": {
        "full_name": "full_name",
        "first_name": "first_name",
        "last_name": "last_name",
        "email": ["email", "work_email"],
        "phone": ["phone_number", "work_phone_number"],
        "company": "company_name",
    },
    "google_ads": {
        "full_name": "FULL_NAME",
        "first_name": "FIRST_NAME",
        "last_name": "LAST_NAME",
        "email": ["EMAIL", "WORK_EMAIL"],
        "phone": ["PHONE_NUMBER", "WORK_PHONE"],
        "company": "COMPANY_NAME",
    },
    "typeform": {
        "full_name": "full_name",
        "first_name": "first_name",
        "last_name": "last_name",
        "email": "email",
        "phone": "phone",
        "company": "company",
        "message": "message",
        "service_type": "service_type",
    },
    "webflow": {
        "full_name": "Name",
        "first_name": "First Name",
        "last_name": "Last Name",
        "email": "Email",
        "phone": ["Phone", "Phone Number"],
        "company": "Company",
        "message": "Message",
    },
    "generic": {
        "full_name": "name",
        "first_name": "first_name",
        "last_name": "last_name",
        "email": "email",
        "phone": "phone",
        "company": "company",
        "message": "message",
        "service_type": "service_type",
    },
}

_WEBFLOW_TIMESTAMP = re.compile(r"[0-9]{1,16}")
_CHALLENGE = re.compile(r"[\x21-\x7e]{1,256}")  # Facebook sends an integer; nothing else is echoed


class SignatureRefused(Exception):
    """The request is not provably the platform's: bad or missing signature, stale timestamp, no secret."""


class PayloadUnreadable(Exception):
    """The body is not JSON, or not the platform's shape, or the mapping cannot read it.

    `fields` names each problem where it is (`entry[0].changes[1].value.leadgen_id`, or a lead field
    for the mapping), in the API's error shape.
    """

    def __init__(self, message: str, fields: dict[str, list[str]] | None = None):
        super().__init__(message)
        self.message = message
        self.fields = fields or {}


@dataclass(frozen=True)
class Submission:
    """One lead as a platform sent it, before the mapping."""

    platform_id: str  # leadgen_id / lead_id / form_response.token / Webflow submission id / webhook-id
    # The platform's own field keys → text: Facebook field_data names, Google column ids, Typeform refs
    # (and `hidden.<name>` for hidden fields), Webflow field names. Generic: empty, the mapping reads `document`.
    answers: dict[str, str]
    document: dict  # the JSON the generic mapping reads; the platform's item otherwise (Google's without its key)
    is_test: bool
    fetch: bool = False  # Facebook: the answers are read from the Graph API by a job
    context: dict = field(default_factory=dict)  # ids that are not the person's: form, campaign, page, ad…


# --- signatures ------------------------------------------------------------------------------


def verify(kind: str, *, secrets: Mapping[str, str], headers: Mapping[str, str], body: bytes, now: float) -> None:
    """Raise SignatureRefused unless `body` and `headers` are signed as `kind` signs them with `secrets["secret"]`.

    `now` is Unix seconds, for Webflow's time window. Standard Webhooks' window (five minutes either way)
    is checked by its library against the clock.
    """
    check = _VERIFIERS.get(kind)
    if check is None:
        raise ValueError(f"unknown source kind {kind!r}")
    secret = secrets.get("secret") or ""
    if not secret:
        raise SignatureRefused("The source has no secret set: every request is refused.")
    check(secret, {name.lower(): value for name, value in headers.items()}, body, now)


def _verify_facebook(secret: str, headers: dict, body: bytes, now: float) -> None:
    given = headers.get("x-hub-signature-256", "")
    if not given:
        raise SignatureRefused("X-Hub-Signature-256 is missing.")
    expected = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    if not _same(expected, given):
        raise SignatureRefused("X-Hub-Signature-256 does not match the body.")


def _verify_google_ads(secret: str, headers: dict, body: bytes, now: float) -> None:
    try:
        document = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise SignatureRefused("The body is not JSON, so it carries no google_key.") from exc
    key = document.get("google_key") if isinstance(document, dict) else None
    if not isinstance(key, str) or not key:
        raise SignatureRefused("google_key is missing.")
    if not _same(secret, key):
        raise SignatureRefused("google_key is not the key set on the form.")


def _verify_typeform(secret: str, headers: dict, body: bytes, now: float) -> None:
    given = headers.get("typeform-signature", "")
    if not given:
        raise SignatureRefused("Typeform-Signature is missing.")
    digest = hmac.new(secret.encode(), body, hashlib.sha256).digest()
    if not _same("sha256=" + base64.b64encode(digest).decode(), given):
        raise SignatureRefused("Typeform-Signature does not match the body.")


def _verify_webflow(secret: str, headers: dict, body: bytes, now: float) -> None:
    timestamp = headers.get("x-webflow-timestamp", "")
    given = headers.get("x-webflow-signature", "")
    if not timestamp or not given:
        raise SignatureRefused("x-webflow-timestamp or x-webflow-signature is missing.")
    if not _WEBFLOW_TIMESTAMP.fullmatch(timestamp):
        raise SignatureRefused("x-webflow-timestamp is not a time in milliseconds.")
    if abs(now - int(timestamp) / 1000) > WEBFLOW_TOLERANCE_SECONDS:
        raise SignatureRefused("x-webflow-timestamp is more than five minutes from now.")
    expected = hmac.new(secret.encode(), timestamp.encode() + b":" + body, hashlib.sha256).hexdigest()
    if not _same(expected, given):
        raise SignatureRefused("x-webflow-signature does not match the body.")


def _verify_generic(secret: str, headers: dict, body: bytes, now: float) -> None:
    try:
        Webhook(secret).verify(body, headers, json_parse=False)
    # The library raises ValueError on a malformed signature or secret and on a body that is not UTF-8.
    except (WebhookVerificationError, EmptyWebhookSecretError, ValueError, RuntimeError) as exc:
        raise SignatureRefused(f"Standard Webhooks signature refused: {_library_reason(exc)}") from exc


def _library_reason(exc: Exception) -> str:
    if isinstance(exc, WebhookVerificationError):
        return str(exc)
    return "malformed secret, signature or body"


_VERIFIERS = {
    "facebook": _verify_facebook,
    "google_ads": _verify_google_ads,
    "typeform": _verify_typeform,
    "webflow": _verify_webflow,
    "generic": _verify_generic,
}


def secret_errors(kind: str, secret: str) -> list[str]:
    """Why `secret` cannot sign for `kind` (empty when it can): for the admin, before it is saved."""
    if kind == "generic" and secret:
        try:
            Webhook(secret)
        except (EmptyWebhookSecretError, ValueError, RuntimeError):
            return ["A Standard Webhooks secret is whsec_ followed by base64, as the sender shows it."]
    return []


def facebook_handshake(query: Mapping[str, str], *, verify_token: str) -> str | None:
    """The `hub.challenge` to answer Facebook's subscription GET with, or None when it is not ours."""
    if not verify_token or query.get("hub.mode") != "subscribe":
        return None
    if not _same(verify_token, query.get("hub.verify_token") or ""):
        return None
    challenge = query.get("hub.challenge") or ""
    return challenge if _CHALLENGE.fullmatch(challenge) else None


def _same(expected: str, given: str) -> bool:
    """Constant-time equality; a header holding characters outside ASCII still compares (unequal)."""
    return hmac.compare_digest(expected.encode(), given.encode("utf-8", "replace"))


# --- payloads --------------------------------------------------------------------------------


def submissions(kind: str, *, body: bytes, headers: Mapping[str, str]) -> list[Submission]:
    """The leads in a verified request, as the platform sent them; PayloadUnreadable when it is not its shape.

    An empty list is a request with nothing for us (a Facebook change of another field, a Typeform partial
    response, a Webflow event other than a form submission).
    """
    reader = _READERS.get(kind)
    if reader is None:
        raise ValueError(f"unknown source kind {kind!r}")
    return reader(_parse(body), {name.lower(): value for name, value in headers.items()})


def loggable_body(kind: str, body: bytes) -> str:
    """The body as the request log keeps it: text PostgreSQL can store, without Google's `google_key`
    (the secret travels in the body). `submissions` reads it as it reads the original."""
    text = storable_text(body.decode("utf-8", "replace"))
    if kind != "google_ads":
        return text
    try:
        document = json.loads(text)
    except (ValueError, RecursionError):
        return text
    if isinstance(document, dict) and "google_key" in document:
        document["google_key"] = ""
        return json.dumps(document, ensure_ascii=False)
    return text


def _parse(body: bytes):
    """The body as the API reads every JSON body (foundation.parsers: depth limit, no NUL or lone surrogates)."""
    try:
        return json_body(body)
    except drf_exceptions.ParseError as exc:
        raise PayloadUnreadable("The body is not JSON.", {"body": [str(exc.detail)]}) from exc
    except drf_exceptions.ValidationError as exc:
        raise PayloadUnreadable("The body holds text that cannot be stored.", _flatten(exc.detail)) from exc


def _flatten(detail, at: str = "") -> dict[str, list[str]]:
    """DRF's nested error detail as dotted paths → messages."""
    if isinstance(detail, dict):
        flat = {}
        for key, value in detail.items():
            flat.update(_flatten(value, f"{at}.{key}" if at else str(key)))
        return flat
    messages = detail if isinstance(detail, list) else [detail]
    return {at or "body": [str(message) for message in messages]}


class _Shape:
    """Collects what is wrong where while a payload is read, so one PayloadUnreadable names every problem."""

    def __init__(self):
        self.errors: dict[str, list[str]] = {}

    def fail(self, at: str, message: str) -> None:
        self.errors.setdefault(at, []).append(message)

    def object(self, value, at: str) -> dict | None:
        if isinstance(value, dict):
            return value
        self.fail(at, "Must be an object.")
        return None

    def array(self, value, at: str) -> list | None:
        if isinstance(value, list):
            return value
        self.fail(at, "Must be a list.")
        return None

    def id(self, container: dict, key: str, at: str = "") -> str | None:
        """A platform id: a non-empty string (or an integer, as Graph and Google send some ids)."""
        path = f"{at}.{key}" if at else key
        value = _id_text(container.get(key))
        if value is None:
            self.fail(path, "Required: a non-empty string id.")
        elif len(value) > PLATFORM_ID_MAX_LENGTH:
            self.fail(path, f"Longer than {PLATFORM_ID_MAX_LENGTH} characters.")
            return None
        return value

    def done(self, message: str) -> None:
        if self.errors:
            raise PayloadUnreadable(message, self.errors)


def _id_text(value) -> str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str) and value.strip():
        return value.strip()
    return None


def _ids(container: dict, keys) -> dict:
    return {key: text for key in keys if (text := _id_text(container.get(key))) is not None}


def _text(value) -> str | None:
    """A JSON scalar as the text of an answer; None for null, objects and lists."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else str(value)
    if isinstance(value, str):
        return value
    return None


def _facebook(document, headers: dict) -> list[Submission]:
    if not isinstance(document, dict) or document.get("object") != "page":
        raise PayloadUnreadable("Not a Facebook Page notification.", {"object": ['Must be "page".']})
    shape = _Shape()
    found = []
    for i, entry in enumerate(shape.array(document.get("entry"), "entry") or ()):
        entry = shape.object(entry, f"entry[{i}]")
        changes = shape.array(entry.get("changes"), f"entry[{i}].changes") if entry is not None else None
        for j, change in enumerate(changes or ()):
            at = f"entry[{i}].changes[{j}]"
            change = shape.object(change, at)
            if change is None or change.get("field") != "leadgen":
                continue  # a change of another Page field is no lead
            value = shape.object(change.get("value"), f"{at}.value")
            leadgen_id = shape.id(value, "leadgen_id", f"{at}.value") if value is not None else None
            if leadgen_id is None:
                continue
            context = _ids(value, ("page_id", "form_id", "ad_id", "adgroup_id", "created_time"))
            found.append(
                Submission(
                    platform_id=leadgen_id, answers={}, document=value, is_test=False, fetch=True, context=context
                )
            )
    shape.done("The notification is not in the shape of Facebook's leadgen webhook.")
    return found


def _google_ads(document, headers: dict) -> list[Submission]:
    if not isinstance(document, dict):
        raise PayloadUnreadable("Not a Google Ads lead.", {"body": ["Must be a JSON object."]})
    shape = _Shape()
    lead_id = shape.id(document, "lead_id")
    answers = {}
    for i, column in enumerate(shape.array(document.get("user_column_data"), "user_column_data") or ()):
        at = f"user_column_data[{i}]"
        column = shape.object(column, at)
        if column is None:
            continue
        column_id, value = column.get("column_id"), column.get("string_value", "")
        if not isinstance(column_id, str) or not column_id:
            shape.fail(f"{at}.column_id", "Required: a non-empty string.")
        elif not isinstance(value, str):
            shape.fail(f"{at}.string_value", "Must be a string.")
        else:
            answers[column_id] = value
    is_test = document.get("is_test", False)
    if not isinstance(is_test, bool):
        shape.fail("is_test", "Must be true or false.")
    shape.done("The request is not in the shape of a Google Ads lead form webhook.")
    context = _ids(document, ("form_id", "campaign_id", "adgroup_id", "creative_id", "asset_group_id", "api_version"))
    kept = {key: value for key, value in document.items() if key != "google_key"}
    return [Submission(platform_id=lead_id, answers=answers, document=kept, is_test=is_test, context=context)]


def _typeform(document, headers: dict) -> list[Submission]:
    if not isinstance(document, dict):
        raise PayloadUnreadable("Not a Typeform webhook.", {"body": ["Must be a JSON object."]})
    event_type = document.get("event_type")
    if event_type == "form_response_partial":
        return []  # an unfinished form is no lead
    if event_type != "form_response":
        raise PayloadUnreadable("Not a Typeform response.", {"event_type": ['Must be "form_response".']})
    shape = _Shape()
    response = shape.object(document.get("form_response"), "form_response")
    if response is None:
        shape.done("The request is not in the shape of a Typeform response webhook.")
    token = shape.id(response, "token", "form_response")
    answers = {}
    for i, answer in enumerate(shape.array(response.get("answers", []), "form_response.answers") or ()):
        at = f"form_response.answers[{i}]"
        answer = shape.object(answer, at)
        question = shape.object(answer.get("field"), f"{at}.field") if answer is not None else None
        if question is None:
            continue
        ref = _id_text(question.get("ref")) or _id_text(question.get("id"))
        if ref is None:
            shape.fail(f"{at}.field.ref", "Required: the question's ref.")
        elif (value := _typeform_value(answer)) is not None:
            answers[ref] = value
    hidden = response.get("hidden") or {}
    if isinstance(hidden, dict):
        answers.update({f"hidden.{name}": text for name, value in hidden.items() if (text := _text(value))})
    shape.done("The request is not in the shape of a Typeform response webhook.")
    context = _ids(response, ("form_id", "submitted_at"))
    return [Submission(platform_id=token, answers=answers, document=response, is_test=False, context=context)]


def _typeform_value(answer: dict) -> str | None:
    """An answer's value: under the key its `type` names; choices as their labels; payments never."""
    kind = answer.get("type")
    value = answer.get(kind) if isinstance(kind, str) else None
    if kind == "choice" and isinstance(value, dict):
        return _text(value.get("label")) or _text(value.get("other"))
    if kind == "choices" and isinstance(value, dict):
        labels = value.get("labels") if isinstance(value.get("labels"), list) else []
        labels = [*labels, value.get("other")]
        return ", ".join(text for label in labels if (text := _text(label))) or None
    if kind == "payment":
        return None
    return _text(value)


def _webflow(document, headers: dict) -> list[Submission]:
    if not isinstance(document, dict) or not isinstance(document.get("triggerType"), str):
        raise PayloadUnreadable("Not a Webflow webhook.", {"triggerType": ["Required."]})
    if document["triggerType"] != "form_submission":
        return []  # another site event is no lead
    shape = _Shape()
    payload = shape.object(document.get("payload"), "payload")
    if payload is None:
        shape.done("The request is not in the shape of a Webflow form submission.")
    submission_id = shape.id(payload, "id", "payload")
    data = shape.object(payload.get("data"), "payload.data")
    shape.done("The request is not in the shape of a Webflow form submission.")
    answers = {name: text for name, value in data.items() if (text := _text(value)) is not None}
    context = _ids(payload, ("formId", "siteId", "pageId", "formElementId", "submittedAt", "name"))
    return [Submission(platform_id=submission_id, answers=answers, document=payload, is_test=False, context=context)]


def _generic(document, headers: dict) -> list[Submission]:
    if not isinstance(document, dict):
        raise PayloadUnreadable("The body must be a JSON object.", {"body": ["Must be a JSON object."]})
    shape = _Shape()
    webhook_id = shape.id(headers, "webhook-id")
    shape.done("The request has no Standard Webhooks id.")
    return [Submission(platform_id=webhook_id, answers={}, document=document, is_test=False)]


_READERS = {
    "facebook": _facebook,
    "google_ads": _google_ads,
    "typeform": _typeform,
    "webflow": _webflow,
    "generic": _generic,
}


# --- Facebook's lead, fetched ----------------------------------------------------------------


def facebook_answers(graph_lead: dict) -> dict[str, str]:
    """A Graph API lead's `field_data` as question name → its values joined (a multiple choice has several)."""
    shape = _Shape()
    answers = {}
    for i, item in enumerate(shape.array(graph_lead.get("field_data"), "field_data") or ()):
        item = shape.object(item, f"field_data[{i}]")
        if item is None:
            continue
        name, values = item.get("name"), item.get("values")
        if not isinstance(name, str) or not name:
            shape.fail(f"field_data[{i}].name", "Required: a non-empty string.")
        elif not isinstance(values, list):
            shape.fail(f"field_data[{i}].values", "Must be a list.")
        else:
            answers[name] = ", ".join(text for value in values if (text := _text(value)))
    shape.done("The Graph API lead is not in the shape of a lead.")
    return answers


def facebook_is_test(graph_lead: dict) -> bool:
    """Whether the lead comes from Facebook's Lead Ads Testing Tool (its answers are placeholders)."""
    return any(
        isinstance(value, str) and value.lstrip().lower().startswith(FACEBOOK_TEST_MARKER)
        for item in graph_lead.get("field_data") or ()
        if isinstance(item, dict)
        for value in item.get("values") or ()
    )


def facebook_lead_submission(graph_lead: dict, *, context: Mapping | None = None) -> Submission:
    """The Submission of a lead the Graph API answered: its answers read, marked when it is a test lead.

    `context` is the notification's (Submission.context of the leadgen change); Graph's own ids are added.
    """
    shape = _Shape()
    leadgen_id = shape.id(graph_lead, "id")
    answers = facebook_answers(graph_lead)
    shape.done("The Graph API lead has no id.")
    fetched = {key: graph_lead[key] for key in FACEBOOK_CONTEXT_FIELDS if isinstance(graph_lead.get(key), str | bool)}
    return Submission(
        platform_id=leadgen_id,
        answers=answers,
        document={},
        is_test=facebook_is_test(graph_lead),
        context={**(context or {}), **fetched},
    )


# --- the mapping -----------------------------------------------------------------------------


def mapping_errors(kind: str, mapping) -> dict[str, list[str]]:
    """What is wrong with a source's field mapping, per field (empty when it is usable): for the admin."""
    if not isinstance(mapping, dict):
        return {"field_mapping": ["Must be an object: our field → the platform's key."]}
    errors: dict[str, list[str]] = {}
    for name, where in mapping.items():
        if name not in MAPPED_FIELDS:
            errors[str(name)] = [f"Not a lead field: use {', '.join(MAPPED_FIELDS)}."]
        elif kind == "generic":
            if not isinstance(where, str) or not where.strip():
                errors[name] = ["Must be a JMESPath expression."]
            elif (problem := _expression_problem(where)) is not None:
                errors[name] = [f"Not a JMESPath expression: {problem}"]
        elif not _keys(where):
            errors[name] = ["Must be the platform's field key, or a list of keys tried in order."]
    return errors


def mapped_fields(kind: str, submission: Submission, mapping: Mapping | None) -> dict[str, str]:
    """Our lead fields from a submission, by the source's mapping over the kind's DEFAULT_MAPPINGS.

    Only fields with a value are returned; checking them (required, lengths, email, phone) is the lead
    pipeline's. A full name fills the first name (and the last name, when that is empty too).
    Raises PayloadUnreadable, per field, when the mapping is not valid or points at something not a value.
    """
    if problems := mapping_errors(kind, mapping or {}):
        raise PayloadUnreadable("The field mapping is not valid.", problems)
    mapping = {**DEFAULT_MAPPINGS[kind], **(mapping or {})}
    found: dict[str, str] = {}
    errors: dict[str, list[str]] = {}
    for name, where in mapping.items():
        try:
            if kind == "generic":
                value = _searched(where, submission.document)
            else:
                value = _looked_up(submission.answers, where)
        except ValueError as exc:
            errors[name] = [str(exc)]
            continue
        if value is not None and value.strip():
            found[name] = value.strip()
    if errors:
        raise PayloadUnreadable("The mapping could not read every field.", errors)
    full_name = " ".join(found.pop("full_name", "").split())
    if full_name and not found.get("first_name"):
        first, _, last = full_name.partition(" ")
        found["first_name"] = first
        if last and not found.get("last_name"):
            found["last_name"] = last
    return {name: found[name] for name in LEAD_FIELDS if name in found}


def _keys(where) -> list[str]:
    keys = [where] if isinstance(where, str) else where if isinstance(where, list) else []
    return keys if keys and all(isinstance(key, str) and key for key in keys) else []


def _looked_up(answers: Mapping[str, str], where) -> str | None:
    """The first of the keys that the platform answered; keys match exactly, else ignoring case."""
    folded = None
    for key in _keys(where):
        if key in answers:
            return answers[key]
        if folded is None:
            folded = {name.casefold(): value for name, value in reversed(answers.items())}
        if key.casefold() in folded:
            return folded[key.casefold()]
    return None


@lru_cache(maxsize=256)
def _compiled(expression: str):
    return jmespath.compile(expression)


def _expression_problem(expression: str) -> str | None:
    try:
        _compiled(expression)
    except JMESPathError as exc:
        return str(exc).splitlines()[0]
    return None


def _searched(expression: str, document: dict) -> str | None:
    """The value a JMESPath expression finds; a list of values is joined, an object is an error."""
    try:
        found = _compiled(expression).search(document)
    except JMESPathError as exc:  # a function given the wrong type of argument, at search time
        raise ValueError(f"The expression failed on this document: {str(exc).splitlines()[0]}") from exc
    if found is None:
        return None
    if isinstance(found, list):
        texts = [_text(item) for item in found]
        if all(text is not None for text in texts):
            return ", ".join(texts)
    elif (text := _text(found)) is not None:
        return text
    raise ValueError("The expression finds an object or nested list, not a value.")
