"""Job handlers of the CRM."""

from django.db import DatabaseError

from crm import escalation, services
from crm.intake import LEAD_CREATED
from foundation.db import describe_db_error
from jobs import PermanentError, TransientError, handler, handler_of_many
from leadgen.selectors import LeadNotFound
from leadgen.services import LEAD_ARRIVED


@handler(LEAD_CREATED)  # an email lead, emitted by its capture
@handler(LEAD_ARRIVED)  # a lead of the web form, the chat or a platform, emitted by leadgen's fan-out
def lead_created(job):
    try:
        services.lead_created_process(lead_id=job.payload["lead_id"])
    except LeadNotFound as exc:
        raise PermanentError(f"lead {job.payload['lead_id']} does not exist") from exc
    except services.LeadIncomplete as exc:
        raise PermanentError(str(exc)) from exc
    except DatabaseError as exc:
        raise TransientError(f"crm write failed: {describe_db_error(exc)}") from exc


@handler_of_many(LEAD_CREATED)
@handler_of_many(LEAD_ARRIVED)
def leads_created(jobs) -> list:
    """The leads of several jobs in one transaction; a lead that cannot be processed is left to `lead_created`,
    which gives its job the outcome that says why."""
    outcomes = services.leads_created_process(lead_ids=[job.payload["lead_id"] for job in jobs])
    return [job for job in jobs if isinstance(outcomes[job.payload["lead_id"]], Exception)]


@handler(escalation.ESCALATE_KIND)
def escalate_overdue(job):
    try:
        escalation.overdue_tasks_escalate()
    except DatabaseError as exc:
        raise TransientError(f"crm write failed: {describe_db_error(exc)}") from exc


@handler(escalation.ALERT_KIND)
def escalation_alert(job):
    escalation.escalation_alert_send(job)
