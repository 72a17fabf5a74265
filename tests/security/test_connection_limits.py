"""Connections are bounded before a request reaches the application: the real web process (config.serve,
daphne) closes a connection whose request head has not arrived within REQUEST_HEAD_TIMEOUT_SECONDS (408),
refuses a client's connections beyond MAX_CONNECTIONS_PER_IP (429), and picks a body's limit on the path
Django routes, however it is spelled."""

import asyncio
import select
import socket
import time

import pytest
from asgiref.testing import ApplicationCommunicator

from config.asgi import application
from leadgen.models import Lead
from tests.conftest import subprocess_env, web_process

pytestmark = pytest.mark.django_db(transaction=True)

HEAD_TIMEOUT = 2.0
CONNECTIONS_PER_IP = 4


@pytest.fixture(scope="module")
def web():
    env = subprocess_env(
        REQUEST_HEAD_TIMEOUT_SECONDS=str(HEAD_TIMEOUT),
        REQUEST_BODY_TIMEOUT_SECONDS="3",
        MAX_CONNECTIONS_PER_IP=str(CONNECTIONS_PER_IP),
    )
    with web_process(env) as (_, port):
        yield port


def read_answer(sock) -> bytes:
    answer = b""
    try:
        while chunk := sock.recv(65536):
            answer += chunk
    except ConnectionResetError:
        pass
    return answer


def status_of(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1])


def healthz(sock) -> bytes:
    """One keep-alive request on `sock`, and its answer."""
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
    answer = b""
    while not answer.endswith(b"ok\n"):
        chunk = sock.recv(65536)
        if not chunk:
            break
        answer += chunk
    return answer


def test_a_request_head_sent_a_line_at_a_time_is_cut_off_at_the_deadline(web):
    started = time.monotonic()
    answer, sent = b"", 0
    with socket.create_connection(("127.0.0.1", web), timeout=10) as sock:
        sock.sendall(b"POST /api/leads HTTP/1.1\r\n")
        # A line every 0.7 s, each of which resets any idle timeout, unless the server has answered meanwhile.
        while time.monotonic() - started < 4 * HEAD_TIMEOUT:
            if select.select([sock], [], [], 0.7)[0]:
                answer = read_answer(sock)
                break
            sock.sendall(b"X-Line-%d: %d\r\n" % (sent, sent))
            sent += 1
    took = time.monotonic() - started
    assert answer, f"still open after {took:.1f} s and {sent} header lines"
    assert status_of(answer) == 408 and b'"timeout"' in answer
    assert took < HEAD_TIMEOUT + 2, f"closed after {took:.1f} s, not at the {HEAD_TIMEOUT} s deadline"


def test_a_connection_kept_alive_waits_for_its_next_head_only_as_long(web):
    with socket.create_connection(("127.0.0.1", web), timeout=20) as sock:
        assert status_of(healthz(sock)) == 200
        started = time.monotonic()
        sock.sendall(b"GET /healthz HTTP/1.1\r\n")  # and nothing more
        read_answer(sock)
    assert time.monotonic() - started < HEAD_TIMEOUT + 2


def test_a_client_beyond_its_connections_is_refused_until_one_closes(web):
    time.sleep(0.3)  # earlier tests' connections are gone
    held = [socket.create_connection(("127.0.0.1", web), timeout=10) for _ in range(CONNECTIONS_PER_IP)]
    try:
        for sock in held:
            assert status_of(healthz(sock)) == 200
        with socket.create_connection(("127.0.0.1", web), timeout=10) as extra:
            answer = read_answer(extra)
        assert status_of(answer) == 429 and b"Retry-After" in answer and b'"too_many_connections"' in answer
        held.pop().close()
        time.sleep(0.2)
        with socket.create_connection(("127.0.0.1", web), timeout=10) as again:
            assert status_of(healthz(again)) == 200
    finally:
        for sock in held:
            sock.close()


@pytest.mark.parametrize(
    ("path", "headers"),
    [
        ("/api/lead%73", ""),  # Django routes the decoded path
        ("/api%2Fleads", ""),
        ("/x/api/leads", "Daphne-Root-Path: /x\r\n"),  # and the path past the root path
    ],
)
def test_the_body_limit_is_the_routed_paths_however_it_is_spelled(web, settings, path, headers):
    time.sleep(0.2)
    declared = settings.LEADS_MAX_BODY_BYTES + 1  # far below the 1 MB of other routes
    with socket.create_connection(("127.0.0.1", web), timeout=10) as sock:
        sock.sendall(
            f"POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n{headers}"
            f"Content-Length: {declared}\r\n\r\n".encode()
        )
        answer = read_answer(sock)
    assert status_of(answer) == 413 and b"too_large" in answer
    assert not Lead.objects.exists()


def test_the_asgi_handler_limits_the_routed_path_too(settings):
    async def post():
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": "/x/api/leads",
            "raw_path": b"/x/api/leads",
            "root_path": "/x",
            "query_string": b"",
            "headers": [(b"host", b"localhost"), (b"content-length", b"%d" % (settings.LEADS_MAX_BODY_BYTES + 1))],
            "client": ("127.0.0.1", 50000),
            "server": ("localhost", 80),
        }
        communicator = ApplicationCommunicator(application, scope)
        await communicator.send_input({"type": "http.request", "body": b"", "more_body": True})
        start = await communicator.receive_output(10)
        await communicator.wait(5)
        return start["status"]

    assert asyncio.run(post()) == 413
