"""The ASGI application daphne serves (config.asgi): pages, API and async views, one thread hand-off per request."""

import asyncio
import json
import threading
import time
import uuid

import pytest
from channels.testing import HttpCommunicator
from django.core.handlers.asgi import ASGIHandler

from config.asgi import application
from config.asgi_handler import RequestThreads
from jobs.runtime import jobs_sweep
from leadgen.models import Lead


class HandOffCountingLoop(asyncio.SelectorEventLoop):
    """An event loop that counts the calls sent to a thread (asgiref's sync_to_async uses run_in_executor)."""

    hand_offs = 0

    def run_in_executor(self, executor, func, *args):
        self.hand_offs += 1
        return super().run_in_executor(executor, func, *args)


def serve(app, method, path, body=b"", headers=()):
    async def request():
        headers_sent = [(b"host", b"localhost"), (b"content-length", str(len(body)).encode()), *headers]
        communicator = HttpCommunicator(app, method, path, body=body, headers=headers_sent)
        response = await communicator.get_response()
        await communicator.wait()  # the handler closes the response after sending it
        return response

    loop = HandOffCountingLoop()
    try:
        response = loop.run_until_complete(request())
    finally:
        loop.close()
    return response, loop.hand_offs


def header(response, name):
    return {key.decode().lower(): value.decode() for key, value in response["headers"]}.get(name.lower(), "")


def test_a_page_is_served_with_its_request_id():
    response, _ = serve(application, "GET", "/healthz")
    assert response["status"] == 200
    assert response["body"] == b"ok\n"
    assert uuid.UUID(header(response, "X-Request-ID"))


def test_the_middleware_chain_and_the_view_cost_one_hand_off_not_one_per_middleware():
    _, ours = serve(application, "GET", "/healthz")
    _, djangos = serve(ASGIHandler(), "GET", "/healthz")
    # request_started's receivers, the chain with the view, and response.close (request_finished).
    assert ours <= 3
    assert djangos >= ours + 10, "Django's own handler hands each middleware hook to a thread"


def request_threads():
    return {thread.ident for thread in threading.enumerate() if thread.name.startswith("django-request")}


def test_requests_reuse_a_thread_of_an_earlier_request_instead_of_starting_one():
    serve(application, "GET", "/healthz")
    before = request_threads()
    for _ in range(5):
        response, _ = serve(application, "GET", "/healthz")
        assert response["status"] == 200
    assert before and request_threads() == before


def test_a_thread_still_running_a_call_of_its_request_is_not_given_to_another():
    threads = RequestThreads(idle_max=4)
    thread, release = threads.take(), threading.Event()
    thread.submit(release.wait)  # a view still running after its client left
    threads.give_back(thread)
    assert threads.idle == 0 and threads.take() is not thread
    release.set()

    idle = threads.take()
    idle.submit(lambda: None).result()
    threads.give_back(idle)
    assert threads.idle == 1 and threads.take() is idle


def test_idle_threads_beyond_the_limit_end():
    threads, others = RequestThreads(idle_max=1), request_threads()
    first, second = threads.take(), threads.take()
    for thread in (first, second):
        thread.submit(lambda: None).result()
    running = request_threads() - others
    for thread in (first, second):
        threads.give_back(thread)
    assert threads.idle == 1
    deadline = time.monotonic() + 5
    while len(request_threads() & running) > 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(request_threads() & running) == 1


@pytest.mark.django_db(transaction=True)
def test_an_async_view_still_answers_under_the_sync_chain(settings):
    settings.READYZ_CACHE_SECONDS = 0
    jobs_sweep()  # as beat does: /readyz checks that the sweep runs
    response, _ = serve(application, "GET", "/readyz", headers=[(b"accept", b"application/json")])
    assert response["status"] == 200
    assert json.loads(response["body"])["status"] == "ok"


@pytest.mark.django_db(transaction=True)
def test_the_lead_api_saves_the_lead_and_answers_errors_per_field(settings):
    settings.LLM_BASE_URL = ""  # rules only: no upstream in this test
    body = {
        "firstName": "Ada",
        "lastName": "Lovelace",
        "email": "ada@analytical.example.com",
        "message": "We need help automating our monthly reporting.",
        "serviceType": "dedicated_team",
    }
    headers = [(b"content-type", b"application/json")]
    response, _ = serve(application, "POST", "/api/leads", json.dumps(body).encode(), headers)
    assert response["status"] == 200, response["body"]
    assert Lead.objects.get(public_id=json.loads(response["body"])["leadId"]).email == body["email"]

    response, _ = serve(application, "POST", "/api/leads", json.dumps({**body, "email": "nope"}).encode(), headers)
    assert response["status"] == 400
    assert "email" in json.loads(response["body"])["error"]["fields"]


def test_daphnes_content_type_parse_is_memoized_and_answers_as_before():
    from twisted.web import http as twisted_http

    parse = twisted_http._parseContentType
    assert parse.cache_info().maxsize == 256, "config.asgi memoizes it"
    assert parse(b"application/x-www-form-urlencoded; charset=utf-8") == b"application/x-www-form-urlencoded"
    assert parse(b"Multipart/Form-Data; boundary=xyz") == b"multipart/form-data"
    assert parse(b"application/json") == parse.__wrapped__(b"application/json") == b"application/json"
