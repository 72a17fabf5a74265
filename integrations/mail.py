"""Sending email through Django's backend (anymail's Mailgun in production, over requests).

Maps anymail's errors to the job layer's kinds and logs a failed call as
HttpClient logs one (host and path). Error texts keep the status code only:
anymail's own message quotes the API response, which may contain recipient
addresses.

The dead-job alert (jobs.DEAD_ALERT_KIND) is handled here: the job layer
says what it is, and sending is this module's.

`send_message_once` is what job handlers use: the message gets a Message-ID
derived from the job key, so every attempt sends the same message; its send is
recorded as a job step the moment it returns, so a job re-run after a later
failure does not send it again; and a retry first asks Mailgun whether it
accepted that Message-ID already (a send whose answer was lost).
"""

import hashlib

import requests
from anymail.exceptions import AnymailAPIError, AnymailError, AnymailRecipientsRefused
from django.conf import settings
from django.core.mail import EmailMessage
from django.core.mail.utils import DNS_NAME

import jobs
from integrations.http import is_transient_status, log_failed_call
from integrations.mailgun import client as mailgun
from jobs import PermanentError, TransientError

EMAIL_STEP = "email"


def stable_message_id(key: str) -> str:
    """The same Message-ID for every attempt of one job: `<sha256(key)[:32]@sender domain>`."""
    domain = settings.ANYMAIL.get("MAILGUN_SENDER_DOMAIN") or str(DNS_NAME)
    return f"<{hashlib.sha256(key.encode()).hexdigest()[:32]}@{domain}>"


def send_message_once(job, message: EmailMessage) -> str:
    """Send `message` at most once for this job (by key); returns its Message-ID."""
    message_id = stable_message_id(job.key)
    message.extra_headers["Message-ID"] = message_id

    def send():
        events = job.attempts > 1 and mailgun.events_client_from_settings()
        if events and events.message_accepted(message_id):
            return {"message_id": message_id, "accepted_earlier": True}
        send_message(message)
        return {"message_id": message_id}

    jobs.step_once(job, EMAIL_STEP, send)
    return message_id


@jobs.handler(jobs.DEAD_ALERT_KIND)
def dead_alert(job):
    send_message_once(job, jobs.dead_alert_message(job))


def send_message(message: EmailMessage) -> None:
    try:
        message.send()
    except AnymailRecipientsRefused as exc:
        raise PermanentError("email: all recipients refused") from exc
    except AnymailAPIError as exc:
        status = exc.status_code
        _log_failed_call(exc)
        if status is None or is_transient_status(status):
            raise TransientError(f"email: provider error (HTTP {status})") from exc
        raise PermanentError(f"email: rejected (HTTP {status})") from exc
    except (AnymailError, ValueError) as exc:
        raise PermanentError(f"email: {type(exc).__name__}") from exc
    except (OSError, requests.RequestException) as exc:
        raise TransientError(f"email: {type(exc).__name__}") from exc


def _log_failed_call(exc: AnymailAPIError) -> None:
    # An error answer carries its response; a call that got none wraps requests' error, which carries the request.
    response = getattr(exc, "response", None)
    request = response.request if response is not None else getattr(exc.__cause__, "request", None)
    log_failed_call(
        "email",
        method=getattr(request, "method", None),
        url=getattr(request, "url", None),
        status=exc.status_code,
        timed_out=isinstance(exc.__cause__, requests.Timeout),
    )
