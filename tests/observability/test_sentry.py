"""Errors reach Sentry with personal data redacted: a web process (config.serve, as deployed) with SENTRY_DSN
pointing at a local ingest endpoint, and a view that fails with an email address in its message."""

import gzip
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests
from sentry_sdk.envelope import Envelope

from tests.conftest import subprocess_env, web_process

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

EMAIL = "ada.lovelace@analytical.example"
PHONE = "+44 20 7946 0958"
VISITOR_IP = "203.0.113.9"
COOKIE = "sessionid=cookie-value-that-must-not-leave"
CHAT_KEY = "chat-key-that-must-not-leave"


class Ingest(ThreadingHTTPServer):
    """Sentry's envelope endpoint (POST /api/<project>/envelope/), keeping each envelope it receives."""

    def __init__(self):
        self.envelopes: list[bytes] = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(handler):
                body = handler.rfile.read(int(handler.headers["Content-Length"]))
                if handler.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                self.envelopes.append(body)
                handler.send_response(200)
                handler.send_header("Content-Type", "application/json")
                handler.end_headers()
                handler.wfile.write(b"{}")

            def log_message(handler, *args):
                pass

        super().__init__(("127.0.0.1", 0), Handler)

    def events(self) -> list[dict]:
        return [item.payload.json for body in self.envelopes for item in Envelope.deserialize(body).items
                if item.type == "event"]  # fmt: skip


@pytest.fixture
def ingest():
    server = Ingest()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def web(ingest):
    env = subprocess_env(
        DJANGO_SETTINGS_MODULE="tests.observability.settings",
        SENTRY_DSN=f"http://public-key@127.0.0.1:{ingest.server_address[1]}/1",
        SENTRY_ENVIRONMENT="test",
        TRUSTED_PROXY_COUNT=1,
        CHAT_API_KEY=CHAT_KEY,
    )
    with web_process(env) as (_, port):
        yield port


def test_an_error_in_a_view_is_reported_without_personal_data(web, ingest):
    response = requests.post(
        f"http://127.0.0.1:{web}/fail",
        params={"email": EMAIL},
        json={"email": EMAIL, "phone": PHONE, "note": "call me"},
        headers={"Cookie": COOKIE, "X-Forwarded-For": VISITOR_IP, "X-Chat-Api-Key": CHAT_KEY, "X-User-IP": VISITOR_IP,
                 "Referer": f"https://example.com/form?email={EMAIL}"},  # fmt: skip
    )
    assert response.status_code == 500
    deadline = time.monotonic() + 15
    while not ingest.events() and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1)  # for a second report of the same error, were there one
    events = ingest.events()
    assert len(events) == 1, "one event for one error"
    event = events[0]

    (exception,) = event["exception"]["values"]
    assert (exception["type"], exception["value"]) == ("LookupError", "no contact for [EMAIL]")
    (frame,) = [frame for frame in exception["stacktrace"]["frames"] if frame["function"] == "fail"]
    assert frame["vars"]["email"] == "'[EMAIL]'"
    request = event["request"]
    assert (request["method"], request["url"].rsplit("/", 1)[-1]) == ("POST", "fail")
    assert request["query_string"] == "email=[EMAIL]"
    assert request["data"] == {"email": "[EMAIL]", "phone": "[PHONE]", "note": "call me"}
    assert "cookies" not in request and "env" not in request
    headers = {name.lower(): value for name, value in request["headers"].items()}
    assert set(headers) <= {"host", "user-agent", "accept", "accept-encoding", "content-type", "content-length",
                            "referer"}  # fmt: skip
    assert headers["referer"] == "https://example.com/form?email=[EMAIL]"
    assert "ip_address" not in event.get("user", {})
    assert event["environment"] == "test"

    sent = b"".join(ingest.envelopes).decode()
    for secret in (EMAIL, EMAIL.replace("@", "%40"), PHONE, VISITOR_IP, "cookie-value-that-must-not-leave", CHAT_KEY):
        assert secret not in sent
