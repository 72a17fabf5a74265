"""Job handlers of email lead tracking: a mailbox poll, and the retry processor for parked leads."""

import pybreaker
from django.conf import settings
from django.db import DatabaseError

import jobs
from foundation.db import describe_db_error
from jobs import PermanentError, TransientError, handler
from tracking import services
from tracking.keys import LEAD_RETRY_KIND, POLL_KIND
from tracking.selectors import mailbox_settings


@handler(POLL_KIND, batched=False)
def poll_mailbox(job):
    try:
        mailbox = mailbox_settings(job.payload["mailbox"])
    except LookupError as exc:
        raise PermanentError(str(exc)) from exc
    services.mailbox_poll(mailbox=mailbox, time_budget=settings.IMAP_POLL_TIME_BUDGET_SECONDS)


@handler(LEAD_RETRY_KIND)
def retry_parked_lead(job):
    """Write a parked lead; on the last failed attempt the job layer dead-letters it and alerts.

    A dead job keeps the parsed email for its replay; a succeeded one drops it."""
    try:
        lead = services.email_lead_retry(payload=job.payload)
    except pybreaker.CircuitBreakerError as exc:
        # Not before the breaker lets a trial write through, as when the lead was parked.
        wait = max(services.lead_write_breaker_reopens_in(), settings.LEAD_RETRY_DELAY_SECONDS)
        raise TransientError("lead writes paused: the circuit breaker is open", retry_after=wait) from exc
    except DatabaseError as exc:
        raise TransientError(
            f"lead write failed: {describe_db_error(exc)}", retry_after=settings.LEAD_RETRY_DELAY_SECONDS
        ) from exc
    # The lead holds the message now: the finished job keeps where it came from, not the parsed email.
    jobs.keep_payload_on_success(job, {"source": job.payload.get("source"), "lead_id": lead.pk})

