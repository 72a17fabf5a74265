"""Everything held about one person, found through each app's own `subject_rows`.

A person is named by an email, a phone, or both, normalized as contacts are matched (crm.identity). What
else the records say they are known by is added once: the emails and phones of the leads and contacts those
find (a lead that gave the email and a phone makes leads given with that phone theirs too). Names are never
searched: two people share a name, not an email.
"""

from dataclasses import dataclass, field

from django.apps import apps
from django.contrib.admin.models import LogEntry
from django.contrib.contenttypes.models import ContentType
from django.db.models import Q
from django.utils import timezone

import jobs
from chat import selectors as chat_selectors
from crm import selectors as crm_selectors
from crm.identity import email_key, phone_key
from docs_users import selectors as docs_users_selectors
from leadgen import selectors as lead_selectors
from prototypes import selectors as prototype_selectors
from sources import selectors as source_selectors

ADMIN_LOG = LogEntry._meta.label
LEAD, CONTACT, TASK = "leadgen.Lead", "crm.Contact", "crm.Task"
CHAT_SESSION, PROTOTYPE, TRACKED_USER = "chat.ChatSession", "prototypes.Prototype", "docs_users.TrackedUser"
INBOUND_REQUEST, JOB = "sources.InboundRequest", "jobs.Job"


class SubjectInvalid(ValueError):
    """Neither a usable email nor a usable phone: {field: message}."""

    def __init__(self, fields: dict[str, str]):
        super().__init__("; ".join(fields.values()))
        self.fields = fields


@dataclass(frozen=True)
class Subject:
    emails: frozenset[str]
    phones: frozenset[str]

    @property
    def texts(self) -> list[str]:
        """What a free text naming the person holds: their emails and phones."""
        return sorted(self.emails | self.phones)


def subject_named(*, email: str = "", phone: str = "") -> Subject:
    """The person an email and/or a phone name, normalized; SubjectInvalid when neither is usable."""
    errors = {}
    normalized_email, normalized_phone = email_key(email), phone_key(phone)
    if email.strip() and "@" not in normalized_email:
        errors["email"] = "Enter an email address."
    if phone.strip() and not normalized_phone:
        errors["phone"] = "Enter a phone number (with its +country code outside the default region)."
    if not (email.strip() or phone.strip()):
        errors["email"] = "Give an email, a phone, or both."
    if errors:
        raise SubjectInvalid(errors)
    return Subject(
        emails=frozenset([normalized_email] if normalized_email else []),
        phones=frozenset([normalized_phone] if normalized_phone else []),
    )


@dataclass
class Found:
    """Every row held about the person: {model label: rows as dicts}, and the identifiers that found them."""

    subject: Subject
    rows: dict[str, list[dict]] = field(default_factory=dict)

    def ids(self, label: str) -> list:
        return [row["id"] for row in self.rows.get(label, [])]

    def counts(self) -> dict[str, int]:
        """Rows per table (its database name), the tables with none left out."""
        return dict(sorted((table_name(label), len(rows)) for label, rows in self.rows.items() if rows))

    def held_elsewhere(self) -> list[dict]:
        """What outside services hold about the person, by their ids: to be exported or erased there."""
        held = []
        for lead in self.rows.get(LEAD, []):
            if lead["pipedrive_person_id"]:
                held.append({"service": "Pipedrive", "what": "person", "id": lead["pipedrive_person_id"]})
            if lead["pipedrive_lead_id"]:
                held.append({"service": "Pipedrive", "what": "lead", "id": lead["pipedrive_lead_id"]})
            if lead["clickup_task_id"]:
                held.append({"service": "ClickUp", "what": "sales alert task", "id": lead["clickup_task_id"]})
        for step in self.rows.get("jobs.JobStep", []):
            if isinstance(step["result"], dict) and step["result"].get("task_id"):
                held.append({"service": "ClickUp", "what": "prototype alert task", "id": step["result"]["task_id"]})
        for prototype in self.rows.get(PROTOTYPE, []):
            if prototype["chat_id"]:
                held.append({"service": "V0", "what": "prototype chat", "id": prototype["chat_id"]})
        for user in self.rows.get(TRACKED_USER, []):
            held.append({"service": "Auth0", "what": "user", "id": user["sub"]})
            if user["last_delivered_at"]:
                held.append({"service": "CRM webhook", "what": "docs and MCP profile", "id": user["sub"]})
        return held


def table_name(label: str) -> str:
    return apps.get_model(label)._meta.db_table


def subject_find(subject: Subject, *, for_erasure: bool = False) -> Found:
    """Every row of every app that is about the person. Read in the caller's transaction.

    `for_erasure`: without the contacts' timelines, which go with their contacts (the largest table by far).
    """
    found = _leads_and_contacts(subject)
    known = _known_also_by(found)
    if known != subject:
        found = _leads_and_contacts(known)
    emails, texts = sorted(known.emails), known.texts
    lead_ids = found.ids(LEAD)
    found.rows.update(
        crm_selectors.subject_rows(contact_ids=found.ids(CONTACT), lead_ids=lead_ids, timeline=not for_erasure)
    )
    found.rows.update(chat_selectors.subject_rows(lead_ids=lead_ids, texts=texts))
    found.rows.update(prototype_selectors.subject_rows(lead_ids=lead_ids))
    found.rows.update(docs_users_selectors.subject_rows(emails=emails))
    found.rows.update(source_selectors.subject_rows(lead_ids=lead_ids, texts=texts))
    # A job names a row by its id in its payload; the profile deliveries (kinds tracking.*) name the user as user_id.
    refs = [
        ("", "lead_id", lead_ids),
        ("", "prototype_id", found.ids(PROTOTYPE)),
        ("", "contact_id", found.ids(CONTACT)),
        ("", "task_id", [str(pk) for pk in found.ids(TASK)]),
        ("tracking.", "user_id", found.ids(TRACKED_USER)),
    ]
    found.rows.update(jobs.subject_rows(refs=refs, texts=texts))
    found.rows[ADMIN_LOG] = list(_admin_log(found, texts).order_by("pk").values())
    return found


def _leads_and_contacts(subject: Subject) -> Found:
    emails, phones = sorted(subject.emails), sorted(subject.phones)
    found = Found(subject=subject, rows=lead_selectors.subject_rows(emails=emails, phones=phones))
    found.rows.update(crm_selectors.subject_contacts(emails=emails, phones=phones, lead_ids=found.ids(LEAD)))
    return found


def _known_also_by(found: Found) -> Subject:
    """The subject with the emails and phones its leads and contacts were given with."""
    known = found.rows[LEAD] + found.rows[CONTACT]
    return Subject(
        emails=found.subject.emails | {email_key(row["email"]) for row in known if row["email"].strip()},
        phones=found.subject.phones | {phone_key(row["phone"]) for row in known if phone_key(row["phone"])},
    )


def _admin_log(found: Found, texts):
    """Staff's admin history of the person's rows (of their models and proxies of them), and entries whose
    description names them."""
    named = Q(pk__in=[])
    logged = LogEntry.objects.order_by().values_list("content_type_id", flat=True).distinct()
    for content_type in ContentType.objects.filter(pk__in=logged):
        model = content_type.model_class()
        ids = found.ids(model._meta.concrete_model._meta.label) if model is not None else []
        if ids:
            named |= Q(content_type=content_type, object_id__in=[str(pk) for pk in ids])
    for text in texts:
        named |= Q(object_repr__icontains=text) | Q(change_message__icontains=text)
    return LogEntry.objects.filter(named)


def subject_document(found: Found) -> dict:
    """The export: one JSON-ready document of every row, by table, and what outside services hold."""
    return {
        "subject": {"emails": sorted(found.subject.emails), "phones": sorted(found.subject.phones)},
        "exported_at": timezone.now(),
        "counts": found.counts(),
        "rows": dict(sorted((table_name(label), rows) for label, rows in found.rows.items() if rows)),
        "held_elsewhere": found.held_elsewhere(),
    }
