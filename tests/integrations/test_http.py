"""The shared HTTP client base against a real local HTTP server."""

import gzip
import json
import logging
import socket
import ssl
import threading
import time
from email.utils import format_datetime

import pytest
from django.utils import timezone
from pytest_httpserver import HTTPServer
from werkzeug import Response

from integrations.http import HttpClient
from jobs.errors import PermanentError, TransientError
from standins.mailbox import make_self_signed_certificate
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


def test_json_params_and_a_calls_own_headers_are_sent(client, httpserver):
    httpserver.expect_request(
        "/v1/people",
        method="POST",
        query_string="fields=a&fields=b&page=2&kept=1",
        headers={"Content-Type": "application/json", "User-Agent": "other-agent/2", "X-Api-Token": "t"},
        json={"name": "Ada", "tags": [1, 2]},
    ).respond_with_json({"id": 7})
    client.headers["x-api-token"] = "t"
    response = client.post(
        "people?fields=a",
        params={"fields": ["b"], "page": 2, "skipped": None, "kept": 1},
        json={"name": "Ada", "tags": [1, 2]},
        headers={"user-agent": "other-agent/2"},  # replaces ours, whatever its case
    )
    assert response.status_code == 200 and response.json() == {"id": 7}
    (request, _response), = httpserver.log
    assert request.headers.getlist("User-Agent") == ["other-agent/2"]


def test_a_form_mapping_is_sent_urlencoded_and_bytes_as_they_are(client, httpserver):
    httpserver.expect_request(
        "/v1/form", method="POST", data=b"secret=s+1&response=t%26k",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    ).respond_with_data("ok")
    httpserver.expect_request("/v1/raw", method="PUT", data=b"\x00\x01raw").respond_with_data("ok")
    assert client.post("form", data={"secret": "s 1", "response": "t&k"}).text == "ok"
    assert client.put("raw", data=b"\x00\x01raw").content == b"ok"


def test_answer_headers_are_case_insensitive_and_text_follows_the_charset(client, httpserver):
    httpserver.expect_request("/v1/page").respond_with_data(
        "café".encode("latin-1"), content_type="text/plain; charset=ISO-8859-1", headers={"X-WP-Total": "3"}
    )
    response = client.get("page")
    assert response.headers["x-wp-total"] == response.headers["X-WP-TOTAL"] == "3"
    assert response.encoding == "ISO-8859-1"
    assert response.text == "café"


def test_a_gzip_answer_is_decompressed(client, httpserver):
    body = gzip.compress(json.dumps({"items": list(range(100))}).encode())
    httpserver.expect_request("/v1/big").respond_with_data(
        body, content_type="application/json", headers={"Content-Encoding": "gzip"}
    )
    assert client.get("big").json() == {"items": list(range(100))}


def test_redirects_are_followed_unless_the_call_says_not_to(client, httpserver):
    httpserver.expect_request("/v1/old").respond_with_data("", status=302, headers={"Location": "/v1/new"})
    httpserver.expect_request("/v1/new").respond_with_data("moved here")
    assert client.get("old").text == "moved here"

    response = client.get("old", allow_redirects=False)
    assert response.status_code == 302 and response.is_redirect
    assert response.headers["Location"] == "/v1/new"


def test_a_redirect_loop_is_permanent(client, httpserver):
    httpserver.expect_request("/v1/loop").respond_with_data("", status=302, headers={"Location": "/v1/loop"})
    with pytest.raises(PermanentError, match="redirects"):
        client.get("loop")


def test_a_streamed_body_is_read_in_chunks(client, httpserver):
    httpserver.expect_request("/v1/stream").respond_with_data(b"x" * 200_000)
    with client.get("stream", stream=True) as response:
        assert response.headers["Content-Length"] == "200000"
        chunks = list(response.iter_content(64 * 1024))
    assert b"".join(chunks) == b"x" * 200_000 and len(chunks) > 1


def test_a_body_cut_off_while_streaming_is_transient():
    """A server that promises 1000 bytes, sends 10 and hangs up."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve_once():
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n0123456789")

    server = threading.Thread(target=serve_once, daemon=True)
    server.start()
    client = ExampleClient(f"http://127.0.0.1:{listener.getsockname()[1]}/")
    response = client.get("cut", stream=True)
    with pytest.raises(TransientError, match="connection failed"):
        b"".join(response.iter_content())
    server.join(5)
    listener.close()


def test_one_client_serves_many_threads(client, httpserver):
    httpserver.expect_request("/v1/things").respond_with_json({"ok": True})
    results, errors = [], []

    def call():
        try:
            for _ in range(5):
                results.append(client.get("things").json())
        except Exception as exc:  # noqa: BLE001 - collected for the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=call) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and results == [{"ok": True}] * 40


def test_cookies_set_by_a_service_are_not_sent_back(client, httpserver):
    httpserver.expect_request("/v1/things").respond_with_data("", headers={"Set-Cookie": "lb=backend-2; Path=/"})
    client.get("things")
    client.get("things")
    assert [request.headers.get("Cookie") for request, _response in httpserver.log] == [None, None]


@pytest.fixture
def no_proxies(monkeypatch):
    for name in ("NO_PROXY", "HTTPS_PROXY", "ALL_PROXY", "HTTP_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


def test_the_proxy_named_by_the_environment_carries_the_calls(httpserver, monkeypatch, no_proxies):
    monkeypatch.setenv("HTTP_PROXY", httpserver.url_for("/"))
    httpserver.expect_request("/v1/things").respond_with_json({"via": "proxy"})
    assert ExampleClient("http://api.internal.example/v1").get("things").json() == {"via": "proxy"}
    (request, _response), = httpserver.log
    assert request.headers["Host"] == "api.internal.example"


def test_no_proxy_keeps_a_host_direct(httpserver, monkeypatch, no_proxies):
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{free_port()}")  # nothing listens there
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    httpserver.expect_request("/v1/things").respond_with_json({"via": "direct"})
    assert ExampleClient(httpserver.url_for("/v1")).get("things").json() == {"via": "direct"}


def test_https_trusts_the_ca_bundle_the_environment_names(tmp_path, monkeypatch):
    certificate, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    make_self_signed_certificate(certificate, key)
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(certificate, key)
    server = HTTPServer(host="localhost", port=free_port(), ssl_context=tls)
    server.expect_request("/v1/things").respond_with_json({"tls": True})
    server.start()
    try:
        url = f"https://localhost:{server.port}/v1"
        monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
        monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
        with pytest.raises(TransientError, match="connection failed"):  # not in certifi's bundle
            ExampleClient(url).get("things")
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(certificate))
        assert ExampleClient(url).get("things").json() == {"tls": True}
    finally:
        server.stop()


def test_calls_in_flight_are_bounded_by_the_shared_semaphore(httpserver):
    """Threaded fake: with a bound of 2, the server never sees more than 2 calls at once."""
    in_flight, most = [0], [0]
    lock = threading.Lock()

    def slowly(request):
        with lock:
            in_flight[0] += 1
            most[0] = max(most[0], in_flight[0])
        time.sleep(0.05)
        with lock:
            in_flight[0] -= 1
        return Response("ok")

    server = HTTPServer(host="127.0.0.1", port=free_port(), threaded=True)
    server.expect_request("/v1/slow").respond_with_handler(slowly)
    server.start()
    try:
        bound = threading.BoundedSemaphore(2)
        clients = [ExampleClient(server.url_for("/v1")) for _ in range(6)]
        for each in clients:
            each.in_flight = bound
        threads = [threading.Thread(target=each.get, args=("slow",)) for each in clients]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        server.stop()
    assert most[0] == 2


def test_a_url_that_cannot_be_parsed_is_permanent():
    with pytest.raises(PermanentError, match="not a valid URL"):
        ExampleClient("http://127.0.0.1:99999999/").get("anything")
