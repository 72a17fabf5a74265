"""Job handlers of the CRM."""

from django.db import DatabaseError

from crm import escalation, services
from crm.intake import LEAD_CREATED
from foundation.db import describe_db_error
from jobs import PermanentError, TransientError, handler
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


@handler(escalation.ESCALATE_KIND)
def escalate_overdue(job):
    try:
        escalation.overdue_tasks_escalate()
    except DatabaseError as exc:
        raise TransientError(f"crm write failed: {describe_db_error(exc)}") from exc


@handler(escalation.ALERT_KIND)
def escalation_alert(job):
    escalation.escalation_alert_send(job)
