"""POSTs a signed-in docs user's JSON profile to the CRM's webhook, signed per Standard Webhooks.

Standard Webhooks (standardwebhooks.com; spec and reference libraries in
github.com/standard-webhooks/standard-webhooks) puts three headers on every
delivery:

- `webhook-id`: the message's id, the same on every retry of one delivery, so
  the receiver can drop a duplicate. The caller passes it (the job key).
- `webhook-timestamp`: Unix seconds of this attempt; the receiver rejects old
  ones, which stops replays.
- `webhook-signature`: `v1,` + base64(HMAC-SHA256(key, "{id}.{timestamp}.{body}")),
  the key being the base64 after the `whsec_` prefix of `CRM_SIGNING_SECRET`.
  The `standardwebhooks` library (the spec's own) computes it, so a receiver
  using any of the spec's libraries verifies what we send.

Without a signing secret the delivery goes unsigned (id and timestamp still
sent). Errors follow the HTTP client base: timeouts, connection errors, 429 and
5xx are transient; any other answer than a 2xx is permanent, redirects
included, since a POST that is redirected is not delivered.
"""

import base64
import binascii
import json
import re
import threading
import time
from datetime import UTC, datetime
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.serializers.json import DjangoJSONEncoder
from standardwebhooks import Webhook

from integrations.http import HttpClient
from jobs import PermanentError

# Header-safe: visible ASCII, no spaces (a job key such as "crm.deliver_profile:auth0|123" fits).
_WEBHOOK_ID = re.compile(r"[\x21-\x7e]{1,255}")


class ProfileWebhookClient(HttpClient):
    service = "profile_webhook"

    def __init__(self, url: str, *, signing_secret: str = "", **kwargs):
        base_url, self.endpoint = _split_url(url)
        super().__init__(base_url, **kwargs)
        self.signer = _signer(signing_secret) if signing_secret else None

    def deliver(self, profile: dict, *, webhook_id: str) -> None:
        """POST the profile once; raises TransientError or PermanentError when it was not accepted."""
        if not _WEBHOOK_ID.fullmatch(webhook_id):
            raise ValueError("webhook_id must be 1-255 visible ASCII characters")
        # ASCII-only JSON (the default escaping): the signed bytes read the same whatever
        # charset the receiver assumes before it verifies.
        body = json.dumps(profile, cls=DjangoJSONEncoder, separators=(",", ":"), sort_keys=True)
        timestamp = int(time.time())
        headers = {"Content-Type": "application/json", "webhook-id": webhook_id, "webhook-timestamp": str(timestamp)}
        if self.signer:
            headers["webhook-signature"] = self.signer.sign(webhook_id, datetime.fromtimestamp(timestamp, UTC), body)
        response = self.post(self.endpoint, data=body.encode(), headers=headers, allow_redirects=False)
        if not 200 <= response.status_code < 300:
            raise PermanentError(f"{self.service}: HTTP {response.status_code}, expected 2xx")


_per_thread = threading.local()


def client_from_settings() -> ProfileWebhookClient | None:
    """None while CRM_WEBHOOK_URL is empty: delivery is off and the caller skips.

    One client per thread, kept while the settings stay the same: its pool
    keeps the connection to the CRM open across deliveries, and the daily sync
    bounds the calls in flight of its own threads through their clients'
    `in_flight`, which one client shared by all threads would mix up between runs.
    """
    if not settings.CRM_WEBHOOK_URL:
        return None
    config = (settings.CRM_WEBHOOK_URL, settings.CRM_SIGNING_SECRET)
    cached = getattr(_per_thread, "client", None)
    if cached is None or cached[0] != config:
        cached = _per_thread.client = (config, ProfileWebhookClient(config[0], signing_secret=config[1]))
    return cached[1]


def _signer(secret: str) -> Webhook:
    # The library decodes leniently, silently dropping characters that are not base64;
    # a mistyped secret must fail here, not as signatures no receiver accepts.
    encoded = secret.removeprefix("whsec_")
    try:
        key = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
    except binascii.Error:
        key = b""
    if len(key) < 16:  # 128 bits, the least an HMAC key should have
        raise ImproperlyConfigured("CRM_SIGNING_SECRET must be whsec_ followed by at least 16 bytes in base64")
    return Webhook(secret)


def _split_url(url: str) -> tuple[str, str]:
    """(base, endpoint) for HttpClient, which joins them, keeping the URL exactly as given:
    no trailing slash added, the query string kept."""
    parts = urlsplit(url)
    directory, _, leaf = parts.path.rpartition("/")
    base_url = urlunsplit((parts.scheme, parts.netloc, directory + "/", "", ""))
    # "./" so a leaf with a colon is not read as a URL scheme by urljoin.
    return base_url, "./" + leaf + (f"?{parts.query}" if parts.query else "")
