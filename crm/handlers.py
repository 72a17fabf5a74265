"""Job handlers of the CRM."""

from django.db import DatabaseError

from config.db import describe_db_error
from crm import services
from crm.events import LEAD_CREATED
from jobs import PermanentError, TransientError, handler
from leadgen.selectors import LeadNotFound


@handler(LEAD_CREATED)
def lead_created(job):
    try:
        services.lead_created_process(lead_id=job.payload["lead_id"])
    except LeadNotFound as exc:
        raise PermanentError(f"lead {job.payload['lead_id']} does not exist") from exc
    except services.LeadIncomplete as exc:
        raise PermanentError(str(exc)) from exc
    except DatabaseError as exc:
        raise TransientError(f"crm write failed: {describe_db_error(exc)}") from exc
