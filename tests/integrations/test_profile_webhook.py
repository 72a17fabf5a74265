"""Profile webhook delivery against a real local HTTP server, verified with the standardwebhooks library."""

import json
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from standardwebhooks import Webhook
from werkzeug import Response

from integrations.profile_webhook.client import ProfileWebhookClient, client_from_settings
from jobs.errors import PermanentError, TransientError

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
PROFILE = {"identity": {"sub": "auth0|42", "email": "ada@acme.com", "company": "Acme"}, "kapa": {"kapaThreadCount": 3}}
VECTORS = json.loads((Path(__file__).parent / "webhook_vectors.json").read_text())


@pytest.mark.parametrize("vector", VECTORS, ids=[v["id"] for v in VECTORS])
def test_signature_vectors_match_the_standard_webhooks_library(vector):
    timestamp = datetime.fromtimestamp(vector["timestamp"], UTC)
    signature = Webhook(vector["secret"]).sign(vector["id"], timestamp, vector["body"])
    assert signature == vector["signature"]


def test_the_official_example_is_among_the_vectors():
    assert VECTORS[0]["signature"] == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


@pytest.fixture
def received(httpserver):
    """Requests the fake CRM got; it answers 204."""
    requests = []

    def accept(request):
        requests.append(request)
        return Response(status=204)

    httpserver.expect_request("/hooks/lead", method="POST").respond_with_handler(accept)
    return requests


def test_delivery_is_signed_and_verifies_with_the_library(httpserver, received):
    client = ProfileWebhookClient(httpserver.url_for("/hooks/lead"), signing_secret=SECRET)
    client.deliver(PROFILE, webhook_id="crm.deliver_profile:auth0|42")

    (request,) = received
    assert request.headers["Content-Type"] == "application/json"
    assert request.headers["webhook-id"] == "crm.deliver_profile:auth0|42"
    assert abs(int(request.headers["webhook-timestamp"]) - time.time()) < 5
    assert request.headers["webhook-signature"].startswith("v1,")
    assert Webhook(SECRET).verify(request.get_data(), dict(request.headers)) == PROFILE


def test_a_retry_keeps_the_id_and_signs_afresh(httpserver, received):
    client = ProfileWebhookClient(httpserver.url_for("/hooks/lead"), signing_secret=SECRET)
    client.deliver(PROFILE, webhook_id="job-7")
    client.deliver(PROFILE, webhook_id="job-7")

    assert [r.headers["webhook-id"] for r in received] == ["job-7", "job-7"]
    for request in received:
        Webhook(SECRET).verify(request.get_data(), dict(request.headers))


def test_a_tampered_body_fails_verification(httpserver, received):
    ProfileWebhookClient(httpserver.url_for("/hooks/lead"), signing_secret=SECRET).deliver(PROFILE, webhook_id="job-1")
    (request,) = received
    tampered = request.get_data().replace(b"Acme", b"Evil")
    with pytest.raises(Exception, match="No matching signature"):
        Webhook(SECRET).verify(tampered, dict(request.headers))


def test_without_a_secret_the_delivery_goes_unsigned(httpserver, received):
    ProfileWebhookClient(httpserver.url_for("/hooks/lead")).deliver(PROFILE, webhook_id="job-1")
    (request,) = received
    assert request.headers["webhook-id"] == "job-1"
    assert "webhook-timestamp" in request.headers
    assert "webhook-signature" not in request.headers
    assert json.loads(request.get_data()) == PROFILE


def test_the_url_is_used_as_given_query_string_included(httpserver):
    httpserver.expect_request("/hooks/lead", query_string="key=a:b").respond_with_data("", status=200)
    ProfileWebhookClient(httpserver.url_for("/hooks/lead") + "?key=a:b").deliver(PROFILE, webhook_id="job-1")
    httpserver.check_assertions()


@pytest.mark.parametrize("status", [500, 502, 503, 429])
def test_server_errors_and_throttling_are_transient(httpserver, status):
    httpserver.expect_request("/hooks/lead").respond_with_data("down", status=status)
    with pytest.raises(TransientError):
        ProfileWebhookClient(httpserver.url_for("/hooks/lead"), signing_secret=SECRET).deliver(PROFILE, webhook_id="j")


@pytest.mark.parametrize("status", [400, 401, 404, 422])
def test_client_errors_are_permanent(httpserver, status):
    httpserver.expect_request("/hooks/lead").respond_with_data("no", status=status)
    with pytest.raises(PermanentError):
        ProfileWebhookClient(httpserver.url_for("/hooks/lead"), signing_secret=SECRET).deliver(PROFILE, webhook_id="j")


def test_a_redirect_is_not_followed_and_is_permanent(httpserver):
    httpserver.expect_request("/hooks/lead").respond_with_data("", status=302, headers={"Location": "/elsewhere"})
    with pytest.raises(PermanentError, match="HTTP 302"):
        ProfileWebhookClient(httpserver.url_for("/hooks/lead")).deliver(PROFILE, webhook_id="j")
    assert len(httpserver.log) == 1


def test_a_slow_crm_times_out_as_transient(httpserver):
    def slow(request):
        time.sleep(0.8)  # the server is single-threaded: keep it short
        return Response(status=204)

    httpserver.expect_request("/hooks/lead").respond_with_handler(slow)
    client = ProfileWebhookClient(httpserver.url_for("/hooks/lead"), read_timeout=0.5)
    with pytest.raises(TransientError, match="timed out"):
        client.deliver(PROFILE, webhook_id="j")
    # The handler is still asleep: it answers before the next test, which shares the server and reads its log.
    deadline = time.monotonic() + 5
    while not httpserver.log and time.monotonic() < deadline:
        time.sleep(0.05)


@pytest.mark.parametrize("webhook_id", ["", "has space", "line\nbreak", "x" * 256])
def test_an_id_that_cannot_be_a_header_is_refused(webhook_id):
    with pytest.raises(ValueError):
        ProfileWebhookClient("http://127.0.0.1:9/").deliver(PROFILE, webhook_id=webhook_id)


@pytest.mark.parametrize("secret", ["whsec_not base64!", "whsec_c2hvcnQ=", "plain-text-password"])
def test_a_malformed_signing_secret_is_refused_at_once(secret):
    with pytest.raises(ImproperlyConfigured):
        ProfileWebhookClient("http://127.0.0.1:9/", signing_secret=secret)


def test_client_from_settings_is_none_until_the_url_is_set(settings):
    settings.CRM_WEBHOOK_URL = ""
    assert client_from_settings() is None
    settings.CRM_WEBHOOK_URL = "https://crm.example.com/hooks/lead"
    settings.CRM_SIGNING_SECRET = SECRET
    client = client_from_settings()
    assert isinstance(client, ProfileWebhookClient)
    assert client.signer is not None


def test_each_thread_keeps_one_client_until_the_settings_change(settings):
    import threading

    settings.CRM_WEBHOOK_URL, settings.CRM_SIGNING_SECRET = "https://crm.example.com/hooks/lead", SECRET
    first = client_from_settings()
    assert client_from_settings() is first  # its pool keeps the connection open

    other_thread = []
    worker = threading.Thread(target=lambda: other_thread.append(client_from_settings()))
    worker.start()
    worker.join()
    assert other_thread[0] is not first  # each thread's bound on calls in flight is its own

    settings.CRM_WEBHOOK_URL = "https://crm.example.com/hooks/v2"
    assert client_from_settings() is not first and client_from_settings().endpoint == "./v2"
