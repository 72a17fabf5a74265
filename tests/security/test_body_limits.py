"""Request bodies are bounded while they arrive: the real web process (config.serve, daphne) answers 413
as soon as a body passes its route's limit and 408 when it is too slow; the ASGI handler does the same."""

import select
import socket
import time

import pytest
from channels.testing import HttpCommunicator

from config.asgi import application
from leadgen.models import Lead
from tests.conftest import subprocess_env, web_process

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def web():
    with web_process(subprocess_env(REQUEST_BODY_TIMEOUT_SECONDS="1.5")) as (_, port):
        yield port


def head(path: str, headers: dict) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: localhost", "Content-Type: application/json"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def status_of(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1])


def read_answer(sock) -> bytes:
    answer = b""
    while chunk := sock.recv(65536):
        answer += chunk
    return answer


def test_a_chunked_body_is_refused_as_soon_as_it_passes_the_limit(web):
    sent = 0
    with socket.create_connection(("127.0.0.1", web), timeout=10) as sock:
        sock.sendall(head("/api/leads", {"Transfer-Encoding": "chunked"}))
        chunk = b"x" * 8192
        while sent < 50 * 1024 * 1024:
            try:
                sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            except (BrokenPipeError, ConnectionResetError):
                break
            sent += len(chunk)
            if select.select([sock], [], [], 0.001)[0]:  # an answer came: stop sending
                break
        answer = read_answer(sock)
    assert status_of(answer) == 413 and b"too_large" in answer
    # Kernel buffers take a few megabytes before the answer is seen; an unbounded server reads all 50 MB first.
    assert sent < 8 * 1024 * 1024, f"answered after {sent} bytes, not at the limit"
    assert not Lead.objects.exists()


def test_a_declared_length_over_the_limit_is_refused_before_any_body(web):
    with socket.create_connection(("127.0.0.1", web), timeout=10) as sock:
        sock.sendall(head("/admin/login/", {"Content-Length": str(50 * 1024 * 1024)}))
        assert status_of(read_answer(sock)) == 413


def test_a_body_that_takes_too_long_is_refused(web):
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", web), timeout=20) as sock:
        sock.sendall(head("/api/leads", {"Content-Length": "100"}) + b'{"first')
        answer = read_answer(sock)
    assert status_of(answer) == 408 and time.monotonic() - started < 15


def test_small_bodies_still_reach_the_app(web):
    with socket.create_connection(("127.0.0.1", web), timeout=10) as sock:
        sock.sendall(head("/api/leads", {"Content-Length": "2", "Connection": "close"}) + b"{}")
        answer = read_answer(sock)
    assert status_of(answer) == 400 and b'"fields"' in answer


async def _asgi_post(path: str, body: bytes, chunk: int) -> dict:
    communicator = HttpCommunicator(application, "POST", path, headers=[(b"host", b"localhost")])
    for start in range(0, len(body), chunk):
        await communicator.send_input(
            {"type": "http.request", "body": body[start : start + chunk], "more_body": start + chunk < len(body)}
        )
    return await communicator.get_response(timeout=10)


def test_the_asgi_handler_bounds_a_chunked_body_too(settings):
    import asyncio

    response = asyncio.run(_asgi_post("/docs-activity", b"x" * 100_000, 1000))
    assert response["status"] == 413
    response = asyncio.run(_asgi_post("/api/leads", b"x" * (settings.LEADS_MAX_BODY_BYTES + 1), 4096))
    assert response["status"] == 413 and not Lead.objects.exists()
