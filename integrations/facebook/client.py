"""Facebook Graph API: the lead a Lead Ads webhook announces, read by its leadgen id.

Reference: Marketing API, Lead Ads, "Retrieving leads": `GET /{leadgen-id}` with a Page access token
(leads_retrieval permission) answers the lead: `id`, `created_time`, `field_data: [{"name", "values"}]`
and, asked for in `fields=`, `form_id`, `ad_id`, `adset_id`, `campaign_id`, `is_organic`, `platform`.
Errors (Graph API guides, "Handling errors") are `{"error": {"message", "type", "code", "error_subcode",
"is_transient", "fbtrace_id"}}`, most with HTTP 400:

- transient: 429 and 5xx; codes 1 and 2 (unknown error, service down), 4, 17, 32, 341, 613 and the
  Business Use Case limits 80000–80014 (throttling); any error marked `is_transient`;
- permanent: the rest, among them 190 (the token expired or was revoked: the source needs a new one),
  10 and 200–299 (a permission is missing) and 100 (no such lead, or not this token's).

The token travels in the Authorization header rather than the `access_token` query parameter: a URL
ends up in exception messages (urllib3 names the URL it failed on) and proxy logs, a header does not.
With the app secret every call carries `appsecret_proof` (hex HMAC-SHA256 of the token with the app
secret), which an app set to "Require App Secret" demands.
"""

import hashlib
import hmac
import re

from django.conf import settings

from integrations.http import HttpClient, HttpResponse, is_transient_status, parse_retry_after
from jobs import PermanentError, TransientError

# The lead's fields the job asks for: the answers and the ids of where they came from.
LEAD_FIELDS = (
    "id",
    "created_time",
    "form_id",
    "ad_id",
    "adset_id",
    "campaign_id",
    "is_organic",
    "platform",
    "field_data",
)
TRANSIENT_CODES = frozenset({1, 2, 4, 17, 32, 341, 613, *range(80000, 80015)})
_GRAPH_ID = re.compile(r"[0-9]{1,32}")


class GraphClient(HttpClient):
    service = "facebook"

    def __init__(self, base_url: str, access_token: str, *, app_secret: str = "", **kwargs):
        """`base_url` names the API version, e.g. https://graph.facebook.com/v21.0."""
        super().__init__(base_url, **kwargs)
        self.has_token = bool(access_token)
        self.headers["Authorization"] = f"Bearer {access_token}"
        self.headers["Accept"] = "application/json"
        self.proof = (
            hmac.new(app_secret.encode(), access_token.encode(), hashlib.sha256).hexdigest() if app_secret else None
        )

    def lead(self, leadgen_id: str) -> dict:
        """The lead as Graph answers it (`id`, `created_time`, `field_data`, and the ids in LEAD_FIELDS it has)."""
        if not self.has_token:
            raise PermanentError("facebook: no page access token is set")
        if not _GRAPH_ID.fullmatch(leadgen_id):
            raise PermanentError("facebook: not a Graph object id")
        response = self.get(leadgen_id, params={"fields": ",".join(LEAD_FIELDS), "appsecret_proof": self.proof})
        try:
            lead = response.json()
        except ValueError as exc:
            # A 2xx that is not JSON comes from something in between (a proxy, a maintenance page).
            raise TransientError("facebook: answer was not JSON") from exc
        if (
            not isinstance(lead, dict)
            or str(lead.get("id")) != leadgen_id
            or not isinstance(lead.get("field_data"), list)
        ):
            raise PermanentError("facebook: the answer is not the lead asked for")
        return lead

    def raise_for_status(self, response: HttpResponse) -> None:
        """Graph names in its error body whether retrying can help: the code decides, then the status."""
        status = response.status_code
        if status < 400:
            return
        error = _graph_error(response)
        code = error.get("code")
        what = f"facebook: Graph error {code}" + (f"/{error['error_subcode']}" if error.get("error_subcode") else "")
        if is_transient_status(status) or error.get("is_transient") is True or code in TRANSIENT_CODES:
            raise TransientError(
                f"{what} (HTTP {status})", retry_after=parse_retry_after(response.headers.get("Retry-After"))
            )
        raise PermanentError(f"{what} (HTTP {status})")


def _graph_error(response: HttpResponse) -> dict:
    """The `error` object of a Graph error answer; only its codes, never its message (it may quote input)."""
    try:
        body = response.json()
    except ValueError:
        return {}
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return {}
    return {
        key: error[key]
        for key in ("code", "error_subcode", "is_transient")
        if isinstance(error.get(key), int | bool | str)
    }


def client_from_settings(access_token: str, *, app_secret: str = "") -> GraphClient:
    """A client of the Graph API at FACEBOOK_GRAPH_URL, with a source's page access token and app secret."""
    return GraphClient(settings.FACEBOOK_GRAPH_URL, access_token, app_secret=app_secret)
