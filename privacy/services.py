"""Data-subject requests: export everything held about a person, or erase it, each with an audit row.

The audit row (SubjectRequest) holds who asked, when, and how many rows of each table were exported or
erased; never the person's email, phone or name. Erasure runs in one transaction: every app erases its own
rows (in the order their references need), the admin history of those rows is anonymized, and the audit row
is written; a failure anywhere leaves everything as it was.
"""

from dataclasses import dataclass

import structlog
from django.contrib.admin.models import LogEntry
from django.db import transaction
from django.utils import timezone

import jobs
from chat import services as chat_services
from crm import services as crm_services
from docs_users import services as docs_users_services
from leadgen import services as lead_services
from privacy.models import SubjectRequest
from privacy.selectors import (
    ADMIN_LOG,
    CHAT_SESSION,
    CONTACT,
    INBOUND_REQUEST,
    JOB,
    LEAD,
    PROTOTYPE,
    TRACKED_USER,
    Found,
    Subject,
    subject_document,
    subject_find,
    table_name,
)
from prototypes import services as prototype_services
from sources import services as source_services

logger = structlog.get_logger(__name__)

ERASED = "[erased]"


@dataclass(frozen=True)
class Erasure:
    request: SubjectRequest
    rows: dict[str, int]  # table → rows deleted or anonymized
    held_elsewhere: list[dict]  # what outside services hold, by their ids: gone from here once erased


def subject_export(*, subject: Subject, actor: str) -> tuple[dict, SubjectRequest]:
    """The export document of the person, and its audit row (rows found per table)."""
    with transaction.atomic():
        request = SubjectRequest.objects.create(kind=SubjectRequest.Kind.EXPORT, actor=actor[:150])
        found = subject_find(subject)
        document = subject_document(found)
        _finish(request, found.counts())
    logger.info("subject_exported", request_id=request.pk, tables=len(request.rows), actor=actor)
    return document, request


def subject_erase(*, subject: Subject, actor: str) -> Erasure:
    """Delete or anonymize every row about the person, in every app, in one transaction with its audit row."""
    with transaction.atomic():
        request = SubjectRequest.objects.create(kind=SubjectRequest.Kind.ERASE, actor=actor[:150])
        found = subject_find(subject, for_erasure=True)
        _finish(request, _erase(found))
    logger.info("subject_erased", request_id=request.pk, rows=sum(request.rows.values()), actor=actor)
    return Erasure(request=request, rows=request.rows, held_elsewhere=found.held_elsewhere())


def _erase(found: Found) -> dict[str, int]:
    """Each app's rows, those that point at others first (tasks at leads, leads last)."""
    lead_ids, texts = found.ids(LEAD), found.subject.texts
    counts: dict[str, int] = {}
    for erased in (
        crm_services.subject_erase(contact_ids=found.ids(CONTACT), lead_ids=lead_ids),
        chat_services.subject_erase(session_ids=found.ids(CHAT_SESSION)),
        prototype_services.subject_erase(prototype_ids=found.ids(PROTOTYPE)),
        source_services.subject_erase(lead_ids=lead_ids, request_ids=found.ids(INBOUND_REQUEST), texts=texts),
        docs_users_services.subject_erase(user_ids=found.ids(TRACKED_USER)),
        lead_services.subject_erase(lead_ids=lead_ids),
        jobs.subject_erase(job_ids=found.ids(JOB)),
    ):
        for label, rows in erased.items():
            counts[table_name(label)] = counts.get(table_name(label), 0) + rows
    # Staff's history stays (who changed what, when); what it says the row was goes.
    anonymized = LogEntry.objects.filter(pk__in=found.ids(ADMIN_LOG)).update(object_repr=ERASED, change_message="")
    counts[table_name(ADMIN_LOG)] = anonymized
    return {table: rows for table, rows in sorted(counts.items()) if rows}


def _finish(request: SubjectRequest, rows: dict[str, int]) -> None:
    request.rows, request.finished_at = rows, timezone.now()
    request.save(update_fields=["rows", "finished_at"])
