"""A client holds a bounded number of streams open at once (foundation.streams): the prototypes' progress stream
per client IP and per lead, the sales chat's answer per IP and per session. Past a cap the open is answered
429 with Retry-After; a stream that ends, or whose client leaves, gives its slot back; the slots are shared
by every web process and lapse when the process holding them dies."""

import asyncio
import json
import os
import signal
import socket
import time

import pytest
from asgiref.testing import ApplicationCommunicator
from django.core.cache import cache

from chat import relay
from config.asgi import application
from prototypes.relay import relays
from standins.agent import Agent
from standins.v0 import V0, Behaviour
from tests.conftest import subprocess_env, web_process
from tests.prototypes.conftest import make_lead

pytestmark = pytest.mark.django_db(transaction=True)

CHAT_KEY = "chat-key-for-tests"


@pytest.fixture(autouse=True)
def stream_settings(settings):
    settings.PROTOTYPES_STREAM_RATE = settings.CHAT_STREAM_RATE_PER_SESSION = settings.CHAT_STREAM_RATE_PER_IP = (
        "1000/min"
    )
    settings.V0_STREAM_IDLE_SECONDS = 2  # a stalled generation's relay stops soon; its streams stay open
    cache.clear()
    yield settings
    cache.clear()


@pytest.fixture
def fake_v0(settings):
    """V0 whose generations stall after their first part: they go on, and so do their streams."""
    server = V0(Behaviour(stall_after=1)).start()
    settings.V0_API_URL = server.url
    settings.V0_API_KEY = server.behaviour.api_key
    yield server
    server.stop()


class Stream:
    """One client's request through config.asgi.application, as daphne hands it over."""

    def __init__(self, method: str, path: str, *, client: str = "198.51.100.7", body: bytes = b"", headers=()):
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "root_path": "",
            "query_string": b"",
            "headers": [(b"host", b"localhost"), (b"content-length", b"%d" % len(body)), *headers],
            "client": (client, 50000),
            "server": ("localhost", 80),
        }
        self.communicator = ApplicationCommunicator(application, scope)
        self.body = body
        self.status, self.headers, self.text = 0, {}, ""

    async def open(self) -> "Stream":
        await self.communicator.send_input({"type": "http.request", "body": self.body, "more_body": False})
        start = await self.communicator.receive_output(10)
        self.status = start["status"]
        self.headers = {name.decode().lower(): value.decode() for name, value in start.get("headers", [])}
        if self.status != 200:  # a whole answer: read it
            message = await self.communicator.receive_output(10)
            self.text = message.get("body", b"").decode()
            await self.communicator.wait(5)
        return self

    async def leave(self):
        await self.communicator.send_input({"type": "http.disconnect"})
        await self.communicator.wait(5)

    def refused_for_streams(self) -> bool:
        return (
            self.status == 429
            and int(self.headers["retry-after"]) > 0
            and json.loads(self.text)["error"]["code"] == "too_many_streams"
        )


def progress(lead, client: str = "198.51.100.7") -> Stream:
    return Stream("GET", f"/api/leads/{lead.public_id}/generate-stream", client=client)


def chat(session: str, visitor: str) -> Stream:
    body = json.dumps({"sessionId": session, "message": "Can you build me a dashboard?"}).encode()
    headers = [(b"content-type", b"application/json"), (b"x-chat-api-key", CHAT_KEY.encode())]
    return Stream("POST", "/api/chat/stream", body=body, headers=[*headers, (b"x-user-ip", visitor.encode())])


def run(scenario):
    async def and_relays_done():
        try:
            return await scenario()
        finally:
            await relays.wait_all()
            await relay.relays_finish(10)

    return asyncio.run(and_relays_done())


def test_a_lead_has_at_most_its_cap_of_progress_streams(fake_v0, settings):
    settings.STREAMS_PER_LEAD, settings.STREAMS_PER_IP = 2, 10
    lead, other = make_lead(), make_lead(email="grace@analytical.example")

    async def scenario():
        first, second = await progress(lead).open(), await progress(lead, client="203.0.113.5").open()
        third = await progress(lead, client="203.0.113.6").open()
        elsewhere = await progress(other).open()
        await first.leave()
        again = await progress(lead, client="203.0.113.6").open()
        for stream in (second, elsewhere, again):
            await stream.leave()
        return first, second, third, elsewhere, again

    first, second, third, elsewhere, again = run(scenario)
    assert (first.status, second.status, elsewhere.status) == (200, 200, 200)
    assert third.refused_for_streams()
    assert again.status == 200, "the stream that left gave its slot back"


def test_a_client_has_at_most_its_cap_of_progress_streams(fake_v0, settings):
    settings.STREAMS_PER_LEAD, settings.STREAMS_PER_IP = 10, 2
    leads = [make_lead(email=f"visitor{n}@analytical.example") for n in range(3)]

    async def scenario():
        held = [await progress(leads[0]).open(), await progress(leads[1]).open()]
        refused = await progress(leads[2]).open()
        other_client = await progress(leads[2], client="203.0.113.9").open()
        await held.pop(0).leave()
        again = await progress(leads[2]).open()
        for stream in (*held, other_client, again):
            await stream.leave()
        return refused, other_client, again

    refused, other_client, again = run(scenario)
    assert refused.refused_for_streams()
    assert other_client.status == 200 and again.status == 200


def test_a_stream_keeps_its_slot_past_the_lease_while_it_is_sent(fake_v0, settings):
    # A lease long enough that a busy host's stalls (a second at times, under make test) do not lapse it.
    settings.STREAMS_PER_LEAD, settings.STREAMS_PER_IP, settings.STREAM_LEASE_SECONDS = 10, 1, 1.5
    lead, other = make_lead(), make_lead(email="grace@analytical.example")

    async def scenario():
        held = await progress(lead).open()
        await asyncio.sleep(3.2)  # over two leases long: renewed meanwhile
        refused = await progress(other).open()
        if refused.status == 200:  # the slot lapsed: fail on the assertion, not hang on an open stream
            await refused.leave()
        await held.leave()
        freed = await progress(other).open()
        await freed.leave()
        return refused, freed

    refused, freed = run(scenario)
    assert refused.refused_for_streams() and freed.status == 200


def test_the_cap_holds_across_processes_and_a_dead_process_gives_its_slots_back(fake_v0, settings):
    """A web process (config.serve, as deployed) holds the client's streams; this process refuses the next one,
    until the slots of the web process, killed, lapse."""
    settings.STREAMS_PER_LEAD, settings.STREAMS_PER_IP = 10, 2
    leads = [make_lead(email=f"visitor{n}@analytical.example") for n in range(3)]
    env = subprocess_env(
        V0_API_URL=fake_v0.url,
        V0_API_KEY=fake_v0.behaviour.api_key,
        V0_STREAM_IDLE_SECONDS=2,
        PROTOTYPES_STREAM_RATE="1000/min",
        STREAMS_PER_IP=2,
        STREAM_LEASE_SECONDS=2,
    )
    sockets = []
    with web_process(env) as (web, port):
        try:
            for lead in leads[:2]:
                sock = socket.create_connection(("127.0.0.1", port), timeout=10)
                path = f"/api/leads/{lead.public_id}/generate-stream"
                sock.sendall(f"GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
                assert sock.recv(65536).startswith(b"HTTP/1.1 200"), "the web process streams"
                sockets.append(sock)
            refused_here = run(lambda: progress(leads[2], client="127.0.0.1").open())
            os.kill(web.pid, signal.SIGKILL)
            web.wait(10)
            killed_at = time.monotonic()
            still_held = run(lambda: progress(leads[2], client="127.0.0.1").open())
            while (freed := run(lambda: _open_and_leave(progress(leads[2], client="127.0.0.1")))).status != 200:
                assert time.monotonic() - killed_at < 10, "the dead process's slots never lapsed"
                time.sleep(0.2)
        finally:
            for sock in sockets:
                sock.close()
    assert refused_here.refused_for_streams(), "the other process's streams count"
    assert still_held.refused_for_streams(), "slots are not given back by a process that died"
    assert freed.opened_at - killed_at < 2 + 1, "they lapse a lease after its last renewal"


async def _open_and_leave(stream: Stream) -> Stream:
    await stream.open()
    stream.opened_at = time.monotonic()
    if stream.status == 200:
        await stream.leave()
    return stream


@pytest.fixture
def slow_agent(settings):
    agent = Agent().start()
    agent.delay = 0.3  # each answer streams for a couple of seconds
    settings.CHAT_API_KEY = CHAT_KEY
    settings.CHAT_AGENT_URL = agent.url
    settings.CHAT_AGENT_TIMEOUT_SECONDS = 20.0
    yield agent
    agent.stop()


def test_chat_answers_are_capped_per_session_and_per_visitor(slow_agent, settings):
    settings.STREAMS_PER_CHAT_SESSION, settings.STREAMS_PER_IP = 2, 3
    visitor, other_visitor = "198.51.100.20", "2001:db8:5::1"

    async def scenario():
        first = await chat("session-a", visitor).open()
        held = [first, await chat("session-a", visitor).open()]
        same_session = await chat("session-a", visitor).open()
        held.append(await chat("session-b", visitor).open())
        same_visitor = await chat("session-c", visitor).open()
        held.append(await chat("session-c", other_visitor).open())
        await first.leave()
        again = await chat("session-c", visitor).open()
        for stream in (*held[1:], again):
            await stream.leave()
        return [stream.status for stream in held], same_session, same_visitor, again

    held, same_session, same_visitor, again = run(scenario)
    assert held == [200, 200, 200, 200]
    assert same_session.refused_for_streams() and same_visitor.refused_for_streams()
    assert again.status == 200, "the answer the visitor left gave its slot back"


def test_a_chat_whose_visitor_leaves_before_it_starts_gives_its_slot_back(slow_agent, settings):
    settings.STREAMS_PER_CHAT_SESSION, settings.STREAMS_PER_IP = 1, 10
    visitor = "198.51.100.30"

    async def scenario():
        gone = chat("session-a", visitor)
        await gone.communicator.send_input({"type": "http.request", "body": gone.body, "more_body": False})
        await gone.communicator.send_input({"type": "http.disconnect"})  # before the admission is known
        await gone.communicator.wait(5)
        # The admission, then the slot given back, on the loop and the batch's thread: nothing marks that moment
        # but the next chat being let in. A refused try takes no slot; a slot held for good refuses every try.
        deadline = time.monotonic() + 15
        while True:
            again = await chat("session-a", visitor).open()
            if again.status != 429 or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.2)
        await again.leave()
        return again

    assert run(scenario).status == 200, "the chat that never started holds no slot"
