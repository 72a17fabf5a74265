"""The CRM's intake of email leads: the LeadCreated job, when a lead may be handed over, and what the job carries.

The job is consumed by the lead processor (crm.handlers). The happy path (a
poll) and the retry path (a parked lead) both enqueue it from the same
capture, so they enqueue the same job: kind, key and payload. The payload is
the lead's id only: the lead row is the record, and no personal data is
copied into the job table.
"""

import structlog

import jobs

logger = structlog.get_logger(__name__)

LEAD_CREATED = "crm.lead_created"


def lead_created_missing_fields(lead) -> list[str]:
    """What the processor needs that this lead lacks: a key of its contact, a phone or an email. A lead of no
    store (an email lead whose sender no store mapping knows yet) joins the shared pool."""
    return [] if lead.phone or lead.email else ["phone or email"]


def lead_created_key(lead_id: int, *, replay: str = "") -> str:
    return f"{LEAD_CREATED}:{lead_id}" + (f":replay:{replay}" if replay else "")


def lead_created_emit(*, lead, replay: str = ""):
    """Enqueue LeadCreated in the caller's transaction, or log which fields are missing and do nothing.

    Emitting twice for the same lead returns the first job; a `replay` label
    makes a new one (the processor is idempotent, so a replay changes nothing
    that is already right).
    """
    missing = lead_created_missing_fields(lead)
    if missing:
        logger.info("lead_created_skipped", lead_id=lead.pk, missing=missing)
        return None
    return jobs.enqueue(
        LEAD_CREATED, {"lead_id": lead.pk}, key=lead_created_key(lead.pk, replay=replay), store_id=lead.store_id
    )


def lead_created_emit_many(*, leads) -> None:
    """`lead_created_emit` for several leads in the caller's transaction: one INSERT for all their jobs."""
    specs = []
    for lead in leads:
        if missing := lead_created_missing_fields(lead):
            logger.info("lead_created_skipped", lead_id=lead.pk, missing=missing)
        else:
            key = lead_created_key(lead.pk)
            specs.append(jobs.JobSpec(LEAD_CREATED, {"lead_id": lead.pk}, key, store_id=lead.store_id))
    if specs:
        jobs.enqueue_many(specs)
