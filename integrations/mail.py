"""Sending email through Django's backend (anymail's Mailgun in production).

Maps anymail's errors to the job layer's kinds. Error texts keep the status
code only: anymail's own message quotes the API response, which may contain
recipient addresses.
"""

from anymail.exceptions import AnymailAPIError, AnymailError, AnymailRecipientsRefused
from django.core.mail import EmailMessage
from requests import RequestException

from jobs.errors import PermanentError, TransientError


def send_message(message: EmailMessage) -> None:
    try:
        message.send()
    except AnymailRecipientsRefused as exc:
        raise PermanentError("email: all recipients refused") from exc
    except AnymailAPIError as exc:
        status = exc.status_code
        if status is None or status == 429 or status >= 500:
            raise TransientError(f"email: provider error (HTTP {status})") from exc
        raise PermanentError(f"email: rejected (HTTP {status})") from exc
    except (AnymailError, ValueError) as exc:
        raise PermanentError(f"email: {type(exc).__name__}") from exc
    except (OSError, RequestException) as exc:
        raise TransientError(f"email: {type(exc).__name__}") from exc
