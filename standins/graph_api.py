"""A local Graph API lead endpoint that answers as Meta's does (Lead Ads "Retrieving leads"; Graph API
"Handling errors").

`GET /{version}/{leadgen-id}` (the version may be left out, as Graph allows) with the page access token,
in the Authorization header (`Bearer` or `OAuth`) or the `access_token` parameter, answers the lead,
limited to the `fields=` asked for (`id`, `created_time` and `field_data` when none are). Failures answer
Graph's error body `{"error": {"message", "type", "code", "error_subcode", "fbtrace_id"}}`:

- no token: 400, code 104; a wrong one: 400, code 190 (OAuthException) with a WWW-Authenticate header;
- with `app_secret` set, a missing or wrong `appsecret_proof`: 400, code 100;
- a lead it does not have: 400, code 100, subcode 33 (GraphMethodException);
- `fail_next(n)`: the next n requests answer 500, code 2, `is_transient` (the service is down);
- `throttle_next(n)`: the next n answer 400, code 4, `is_transient` (application request limit reached).

In tests:

    with GraphApi() as graph:
        graph.add(lead("123456789012345"))
        GraphClient(graph.base_url, graph.access_token).lead("123456789012345")

Alone, for `make run` and the benchmarks, inventing a lead for any id it is asked for:

    python -m standins.graph_api --port 8765
"""

import argparse
import contextlib
import hashlib
import hmac
import json
import re
import secrets
import threading
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from standins.base import Received, StandIn
from standins.platforms import FULL_NAME, PERSON

ACCESS_TOKEN = "standin-page-access-token"
VERSION = "v21.0"
_LEAD_PATH = re.compile(r"/(?:v[0-9]+\.[0-9]+/)?([0-9]{1,32})/?")
_DEFAULT_FIELDS = ("id", "created_time", "field_data")


def lead(
    leadgen_id: str,
    field_data: Mapping[str, str | Sequence[str]] | None = None,
    *,
    form_id: str = "555555555555555",
    ad_id: str = "666666666666666",
    adset_id: str = "888888888888888",
    campaign_id: str = "999999999999999",
    created_time: datetime | None = None,
    is_organic: bool = False,
    platform: str = "fb",
) -> dict:
    """A lead as Graph answers it; `field_data` is question name → answer(s) (by default the person)."""
    # Lead Ads, "Retrieving leads": field_data as [{"name", "values": [...]}]; an organic lead has no ad ids.
    answers = (
        field_data
        if field_data is not None
        else {
            "full_name": FULL_NAME,
            "email": PERSON["email"],
            "phone_number": PERSON["phone"],
            "company_name": PERSON["company"],
        }
    )
    found = {
        "id": leadgen_id,
        "created_time": (created_time or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%S+0000"),
        "form_id": form_id,
        "field_data": [
            {"name": name, "values": [values] if isinstance(values, str) else list(values)}
            for name, values in answers.items()
        ],
        "is_organic": is_organic,
        "platform": platform,
    }
    if not is_organic:
        found |= {"ad_id": ad_id, "adset_id": adset_id, "campaign_id": campaign_id}
    return found


def lead_from_testing_tool(leadgen_id: str, *, form_id: str = "555555555555555", questions: Sequence[str] = ()) -> dict:
    """A lead made by Facebook's Lead Ads Testing Tool: organic, each answer a placeholder."""
    names = questions or ("full_name", "email", "phone_number")
    placeholders = {
        name: "test@meta.com" if name == "email" else f"<test lead: dummy data for {name}>" for name in names
    }
    return lead(leadgen_id, placeholders, form_id=form_id, is_organic=True)


class GraphApi(StandIn):
    """The stand-in server: a real HTTP server on a free port, in a thread while used as a context manager."""

    name = "facebook"

    def __init__(
        self,
        *,
        access_token: str = ACCESS_TOKEN,
        app_secret: str = "",
        invent_leads: bool = False,
        host: str = "127.0.0.1",
        port: int = 0,
        version: str = VERSION,
    ):
        super().__init__()
        self.access_token = access_token
        self.app_secret = app_secret
        self.invent_leads = invent_leads
        self.leads: dict[str, dict] = {}
        self.requests: list[str] = []  # the target (path and query) of every request, in order
        self._failures: list[tuple[int, dict]] = []
        self._lock = threading.Lock()
        graph = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):  # noqa: N802
                status, body, headers = graph._answer(self)
                payload = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=UTF-8")
                self.send_header("Content-Length", str(len(payload)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True
        self.base_url = f"http://{host}:{self.server.server_port}/{version}"

    # --- test knobs --------------------------------------------------------------------------

    def add(self, *leads: dict) -> None:
        with self._lock:
            self.leads.update({found["id"]: found for found in leads})

    def fail_next(self, count: int = 1, *, status: int = 500) -> None:
        """The next `count` requests fail as Graph does when it is down."""
        error = {"message": "An unexpected error has occurred. Please retry your request later.",
                 "error_type": "OAuthException", "code": 2, "is_transient": True}  # fmt: skip
        with self._lock:
            self._failures += [(status, error)] * count

    def throttle_next(self, count: int = 1) -> None:
        """The next `count` requests fail as Graph does past the app's rate limit."""
        error = {"message": "(#4) Application request limit reached", "error_type": "OAuthException",
                 "code": 4, "is_transient": True}  # fmt: skip
        with self._lock:
            self._failures += [(400, error)] * count

    # --- serving -----------------------------------------------------------------------------

    def start(self) -> "GraphApi":
        # A short poll: stopping (shutdown) waits for the serving loop's next look.
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def settings(self) -> dict[str, str]:
        # The page access token is per source (admin); only the address is a setting.
        return {"FACEBOOK_GRAPH_URL": self.base_url}

    def serve_forever(self) -> None:
        try:
            self.server.serve_forever()
        finally:
            self.server.server_close()

    def _answer(self, request: BaseHTTPRequestHandler) -> tuple[int, dict, dict]:
        parts = urlsplit(request.path)
        query = {name: values[-1] for name, values in parse_qs(parts.query).items()}
        with self._lock:
            self.requests.append(request.path)
            failure = self._failures.pop(0) if self._failures else None
        if failure is not None:
            status, error = failure
            return status, _error(**error), {}
        scheme, _, given = (request.headers.get("Authorization") or "").partition(" ")
        token = given.strip() if scheme.lower() in ("bearer", "oauth") else query.get("access_token", "")
        if not token:
            return 400, _error("An access token is required to request this resource.", "OAuthException", 104), {}
        if not hmac.compare_digest(token.encode(), self.access_token.encode()):
            message = "Invalid OAuth access token - Cannot parse access token"
            challenge = f'OAuth "Facebook Platform" "invalid_token" "{message}"'
            return 400, _error(message, "OAuthException", 190), {"WWW-Authenticate": challenge}
        if self.app_secret:
            proof = hmac.new(self.app_secret.encode(), token.encode(), hashlib.sha256).hexdigest()
            given_proof = query.get("appsecret_proof")
            if not given_proof:
                return 400, _error("API calls from the server require an appsecret_proof argument",
                                   "GraphMethodException", 100), {}  # fmt: skip
            if not hmac.compare_digest(proof.encode(), given_proof.encode()):
                return 400, _error("Invalid appsecret_proof provided in the API argument",
                                   "GraphMethodException", 100), {}  # fmt: skip
        matched = _LEAD_PATH.fullmatch(parts.path)
        leadgen_id = matched.group(1) if matched else parts.path.strip("/")
        with self._lock:
            found = self.leads.get(leadgen_id)
        if found is None and matched and self.invent_leads:
            found = lead(leadgen_id, {"full_name": FULL_NAME, "email": f"lead-{leadgen_id}@example.com",
                                      "phone_number": PERSON["phone"], "company_name": PERSON["company"]})  # fmt: skip
        if found is None:
            message = (
                f"Unsupported get request. Object with ID '{leadgen_id}' does not exist, cannot be loaded due to "
                "missing permissions, or does not support this operation. Please read the Graph API documentation "
                "at https://developers.facebook.com/docs/graph-api"
            )
            return 400, _error(message, "GraphMethodException", 100, subcode=33), {}
        wanted = [name.strip() for name in query["fields"].split(",")] if query.get("fields") else _DEFAULT_FIELDS
        answers = {field["name"]: ", ".join(field["values"]) for field in found.get("field_data", [])}
        self.record(Received(self.name, "lead", f"Lead {leadgen_id} fetched", detail=answers))
        return 200, {name: found[name] for name in ("id", *wanted) if name in found}, {}


def _error(
    message: str, error_type: str, code: int, *, subcode: int | None = None, is_transient: bool | None = None
) -> dict:
    error = {"message": message, "type": error_type, "code": code}
    if subcode is not None:
        error["error_subcode"] = subcode
    if is_transient is not None:
        error["is_transient"] = is_transient
    error["fbtrace_id"] = secrets.token_urlsafe(8)
    return {"error": error}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="A local Graph API that answers any lead it is asked for.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--access-token", default=ACCESS_TOKEN, help="the page access token it accepts")
    parser.add_argument("--app-secret", default="", help="when set, appsecret_proof is required")
    parser.add_argument("--version", default=VERSION)
    args = parser.parse_args(argv)
    graph = GraphApi(
        access_token=args.access_token,
        app_secret=args.app_secret,
        invent_leads=True,
        host=args.host,
        port=args.port,
        version=args.version,
    )
    print(f"Graph API stand-in at {graph.base_url}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how it is stopped
        graph.serve_forever()


if __name__ == "__main__":
    main()
