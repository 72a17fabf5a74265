"""The shared HTTP client base against a real local HTTP server."""

import json
import logging
import time
from email.utils import format_datetime

import pytest
from django.utils import timezone
from werkzeug import Response

from integrations.http import HttpClient
from jobs.errors import PermanentError, TransientError
from tests.conftest import free_port


class ExampleClient(HttpClient):
    service = "example"


@pytest.fixture
def client(httpserver):
    return ExampleClient(httpserver.url_for("/v1"), read_timeout=0.5)


def test_success_returns_the_response_and_sends_our_user_agent(client, httpserver, settings):
    ours = {"User-Agent": settings.HTTP_USER_AGENT}
    httpserver.expect_request("/v1/things", method="GET", headers=ours).respond_with_json({"ok": True})
    assert client.get("things").json() == {"ok": True}


@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_server_errors_are_transient(client, httpserver, status):
    httpserver.expect_request("/v1/things").respond_with_data("down", status=status)
    with pytest.raises(TransientError):
        client.get("things")


def test_429_is_transient_and_carries_retry_after_seconds(client, httpserver):
    httpserver.expect_request("/v1/things").respond_with_data("", status=429, headers={"Retry-After": "17"})
    with pytest.raises(TransientError) as raised:
        client.get("things")
    assert raised.value.retry_after == 17


def test_retry_after_as_an_http_date(client, httpserver):
    later = timezone.now() + timezone.timedelta(seconds=90)
    httpserver.expect_request("/v1/things").respond_with_data(
        "", status=503, headers={"Retry-After": format_datetime(later, usegmt=True)}
    )
    with pytest.raises(TransientError) as raised:
        client.get("things")
    assert 85 <= raised.value.retry_after <= 90


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_other_client_errors_are_permanent(client, httpserver, status):
    httpserver.expect_request("/v1/things").respond_with_data("no", status=status)
    with pytest.raises(PermanentError):
        client.get("things")


def test_a_slow_server_times_out_as_transient(client, httpserver):
    def slow(request):
        time.sleep(0.8)  # the server is single-threaded: keep it short
        return Response("late")

    httpserver.expect_request("/v1/slow").respond_with_handler(slow)
    started = time.monotonic()
    with pytest.raises(TransientError, match="timed out"):
        client.get("slow")
    assert time.monotonic() - started < 0.8


def test_a_refused_connection_is_transient():
    with pytest.raises(TransientError, match="connection failed"):
        ExampleClient(f"http://127.0.0.1:{free_port()}/").get("anything")


def test_logs_carry_no_secrets_query_strings_or_bodies(client, httpserver, caplog):
    httpserver.expect_request("/v1/people").respond_with_json({"email": "ada@example.com"})
    with caplog.at_level(logging.DEBUG):
        client.post(
            "people?api_token=s3cr3t-token",
            headers={"Authorization": "Bearer s3cr3t-bearer"},
            data=json.dumps({"email": "ada@example.com", "phone": "+14155550100"}),
        )
    # Everything our process logged, at any level; the fake server's own access log is not ours.
    logged = "\n".join(r.getMessage() for r in caplog.records if not r.name.startswith("werkzeug"))
    assert "http_request" in logged and "/v1/people" in logged
    for leaked in ("s3cr3t", "ada@example.com", "+14155550100", "api_token"):
        assert leaked not in logged
