"""Mailgun's Events API: whether a message was already accepted, for a send whose answer was lost.

anymail sends; this asks. Reference: https://documentation.mailgun.com/docs/mailgun/api-reference/openapi-final/tag/Events/
(GET /v3/{domain}/events, filterable by `message-id` and `event`; items carry
`event` and `message.headers.message-id`, the id without angle brackets).
Basic auth with the user `api` and the API key, as for sending. Events are
indexed within seconds; callers ask only on a retry, after the job layer's
backoff.
"""

import base64

from django.conf import settings

from integrations.http import HttpClient
from jobs import TransientError


class MailgunEventsClient(HttpClient):
    service = "mailgun"

    def __init__(self, api_key: str, *, domain: str, base_url: str = "https://api.mailgun.net/v3"):
        super().__init__(base_url)
        self._authorization = "Basic " + base64.b64encode(f"api:{api_key}".encode()).decode()
        self.domain = domain

    def message_accepted(self, message_id: str) -> bool:
        """Whether Mailgun accepted a message with this Message-ID (with or without angle brackets)."""
        bare = message_id.strip("<>")
        response = self.get(
            f"{self.domain}/events",
            params={"message-id": bare, "event": "accepted", "limit": 1},
            headers={"Authorization": self._authorization, "Accept": "application/json"},
        )
        try:
            items = response.json().get("items") or []
        except (ValueError, AttributeError) as exc:
            raise TransientError("mailgun: events answer was not JSON") from exc
        return any(
            isinstance(item, dict)
            and item.get("event") == "accepted"
            and ((item.get("message") or {}).get("headers") or {}).get("message-id") == bare
            for item in items
        )


def events_client_from_settings() -> MailgunEventsClient | None:
    """None unless email goes through anymail's Mailgun backend with a key and a sender domain."""
    anymail = settings.ANYMAIL
    if settings.EMAIL_BACKEND != "anymail.backends.mailgun.EmailBackend":
        return None
    if not (anymail.get("MAILGUN_API_KEY") and anymail.get("MAILGUN_SENDER_DOMAIN")):
        return None
    return MailgunEventsClient(
        anymail["MAILGUN_API_KEY"],
        domain=anymail["MAILGUN_SENDER_DOMAIN"],
        base_url=anymail.get("MAILGUN_API_URL") or "https://api.mailgun.net/v3",
    )
