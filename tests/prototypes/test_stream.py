"""The progress stream through the real ASGI application (config.asgi), as daphne serves it,
with V0 as a local v2 server: live relay, disconnects, two tabs, reconnects, worker events."""

import asyncio
import json
import subprocess
import sys
import time
import uuid

import pytest
from asgiref.testing import ApplicationCommunicator
from django.conf import settings as django_settings
from django.core.cache import cache
from django.db import close_old_connections

from config.asgi import application
from jobs.models import Job
from prototypes import processor, relay, services
from prototypes.models import Prototype
from prototypes.relay import relays
from tests.conftest import free_port, minute_with_time_left, subprocess_env
from tests.prototypes.conftest import make_lead, run_next_check

pytestmark = pytest.mark.django_db(transaction=True)


class Stream:
    """One browser connection: the response's start, then its body read frame by frame."""

    def __init__(self, path: str, headers=()):
        path, _, query = path.partition("?")
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "GET",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": query.encode(),
            "headers": [(b"host", b"localhost"), (b"accept", b"text/event-stream"), *headers],
            "client": ("127.0.0.1", 50000),
            "server": ("localhost", 80),
        }
        self.communicator = ApplicationCommunicator(application, scope)
        self.status = None
        self.text = ""

    async def open(self):
        await self.communicator.send_input({"type": "http.request", "body": b"", "more_body": False})
        start = await self.communicator.receive_output(10)
        self.status = start["status"]
        self.headers = {k.decode().lower(): v.decode() for k, v in start.get("headers", [])}
        return self

    async def read_until(self, marker: str, timeout: float = 10) -> str:
        deadline = time.monotonic() + timeout
        while marker not in self.text:
            message = await self.communicator.receive_output(max(0.01, deadline - time.monotonic()))
            self.text += message.get("body", b"").decode()
            if not message.get("more_body", False):
                break
        return self.text

    async def finish(self):
        """Read to the end of a response that ends by itself (after `complete`), and let the app finish."""
        while True:
            message = await self.communicator.receive_output(10)
            self.text += message.get("body", b"").decode()
            if not message.get("more_body", False):
                break
        await self.communicator.wait(5)
        return self

    async def leave(self):
        await self.communicator.send_input({"type": "http.disconnect"})
        await self.communicator.wait(5)

    def events(self) -> list[tuple[int, str, dict]]:
        found = []
        for block in self.text.split("\n\n"):
            fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line and line[0] != ":")
            if "event" in fields:
                found.append((int(fields["id"]), fields["event"], json.loads(fields["data"])))
        return found


def stream_path(lead) -> str:
    return f"/api/leads/{lead.public_id}/generate-stream"


def run(scenario):
    async def with_relays_done():
        try:
            return await scenario()
        finally:
            await relays.wait_all()

    try:
        return asyncio.run(with_relays_done())
    finally:
        # A batch cut off by the loop's end still writes in its thread: done before the test's flush.
        for batches in (relay.step_log, relay.starts, relay.chats_created, relay.lease_touches, relay.completions):
            batches.wait_idle()


def test_the_stream_relays_v0_progress_and_ends_with_the_preview(fake_v0):
    lead = make_lead()

    async def scenario():
        stream = await Stream(stream_path(lead)).open()
        assert stream.status == 200 and stream.headers["content-type"].startswith("text/event-stream")
        return await stream.finish()

    stream = run(scenario)
    events = stream.events()
    numbers = [number for number, _, _ in events]
    assert numbers == sorted(set(numbers)) and numbers[0] == 1, "numbered from 1, in order, once each"
    progress = [data for _, kind, data in events if kind == "progress"]
    assert progress[0]["status"] == "Starting your prototype"
    assert any(p["status"] == "Writing app/page.tsx" and p["title"] == "Reporting automation" for p in progress)
    assert max(p.get("step", 0) for p in progress) == 3
    number, kind, data = events[-1]
    prototype = Prototype.objects.get()
    assert kind == "complete" and data["previewUrl"] == f"https://preview.example.com/{prototype.chat_id}"
    assert prototype.state == Prototype.State.COMPLETED and prototype.events == number
    assert Job.objects.filter(kind="prototypes.finished").count() == 1


def test_a_browser_that_leaves_mid_stream_loses_nothing(fake_v0):
    fake_v0.behaviour.frame_interval = 0.3
    fake_v0.behaviour.parts = 4
    lead = make_lead()

    async def scenario():
        stream = await Stream(stream_path(lead)).open()
        await stream.read_until("Thinking about your request")
        await stream.leave()  # Django cancels the response coroutine
        return stream

    stream = run(scenario)
    assert "event: complete" not in stream.text
    prototype = Prototype.objects.get()
    assert prototype.state == Prototype.State.COMPLETED, "the relay went on without the browser"
    statuses = [e.data.get("status") for e in prototype.event_log.all()]
    assert "Writing components/report-table.tsx" in statuses and "Running a build step" in statuses
    assert prototype.event_log.last().kind == "complete"


def test_two_tabs_watch_one_generation(fake_v0):
    fake_v0.behaviour.frame_interval = 0.1
    lead = make_lead()

    async def scenario():
        first = await Stream(stream_path(lead)).open()
        second = await Stream(stream_path(lead)).open()
        await asyncio.gather(first.finish(), second.finish())
        return first, second

    first, second = run(scenario)
    assert len(fake_v0.chats) == 1 and len(fake_v0.requests_to("/chats/async")) == 1, "one V0 chat per lead"
    assert len(fake_v0.requests_to("/resume")) == 1, "one relay of V0's stream"
    assert first.events()[-1] == second.events()[-1]


def test_a_reconnect_resumes_after_its_last_event_id(fake_v0):
    lead = make_lead()
    run(lambda: _read_all(stream_path(lead)))
    total = Prototype.objects.get().events

    async def reconnect(headers):
        stream = await Stream(stream_path(lead), headers=headers).open()
        return await stream.finish()

    again = run(lambda: reconnect([(b"last-event-id", b"2")]))
    assert [number for number, _, _ in again.events()] == list(range(3, total + 1))
    done = run(lambda: reconnect([(b"last-event-id", str(total).encode())]))
    assert done.status == 204, "nothing more will come: the browser stops reconnecting"


async def _read_all(path, headers=()):
    stream = await Stream(path, headers=headers).open()
    return await stream.finish()


def test_a_finished_prototype_is_progress_completed_then_complete_at_once(fake_v0):
    lead = make_lead()
    run(lambda: _read_all(stream_path(lead)))
    stream = run(lambda: _read_all(stream_path(lead)))
    kinds = [(kind, data["state"]) for _, kind, data in stream.events()]
    assert kinds == [("progress", "completed"), ("complete", "completed")]
    assert len(fake_v0.requests_to("/resume")) == 1, "no second relay"


@pytest.mark.parametrize("path", [f"/api/leads/{uuid.UUID(int=1)}/generate-stream", "/api/leads/1/generate-stream"])
def test_a_guessed_or_sequential_id_is_not_found(path):
    stream = asyncio.run(_opened_and_finished(path))
    assert stream.status == 404


def test_a_lead_without_a_prototype_is_not_found():
    lead = make_lead(service_type="dedicated_team")
    assert asyncio.run(_opened_and_finished(stream_path(lead))).status == 404


async def _opened_and_finished(path):
    return await (await Stream(path).open()).finish()


def test_a_client_opening_too_many_streams_is_told_when_to_come_back(settings):
    settings.PROTOTYPES_STREAM_RATE = "2/min"
    minute_with_time_left()
    path = f"/api/leads/{uuid.uuid4()}/generate-stream"
    streams = [asyncio.run(_opened_and_finished(path)) for _ in range(3)]
    assert [stream.status for stream in streams] == [404, 404, 429]
    assert json.loads(streams[2].text)["error"]["code"] == "rate_limited"
    assert 1 <= int(streams[2].headers["retry-after"]) <= 60


@pytest.mark.parametrize("layer", ["reachable", "unreachable"])
def test_a_workers_step_reaches_an_open_stream(fake_v0, settings, caplog, layer):
    """The relay stalls; a worker process (another interpreter) finds the generation done and
    completes it: the open stream hears it through Redis, or, when this process cannot reach the
    channel layer, by reading the log."""
    if layer == "unreachable":
        dead = f"redis://127.0.0.1:{free_port()}/0"
        settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer",
                                               "CONFIG": {"hosts": [dead]}}}  # fmt: skip
    settings.PROTOTYPES_STREAM_HEARTBEAT_SECONDS = 0.5
    settings.V0_STREAM_IDLE_SECONDS = 3  # the stalled relay gives up soon after
    fake_v0.behaviour.stall_after = 1
    lead = make_lead()

    async def scenario():
        stream = await Stream(stream_path(lead)).open()
        await stream.read_until("Thinking about your request")
        await stream.read_until(": keep-alive")
        prototype = await asyncio.to_thread(_the_prototype)
        fake_v0.finish_latest(prototype.chat_id)
        await asyncio.to_thread(_check_in_another_process, prototype.pk)
        await stream.read_until("event: complete")
        await stream.leave()
        return stream

    stream = run(scenario)
    assert stream.events()[-1][1] == "complete"
    assert ("prototype_stream_layer_unavailable" in caplog.text) == (layer == "unreachable")


def _the_prototype():
    try:
        return Prototype.objects.get()
    finally:
        close_old_connections()


def _check_in_another_process(prototype_id):
    code = (
        "import django; django.setup();"
        "from prototypes import processor;"
        f"processor.prototype_check(prototype_id={prototype_id})"
    )
    env = subprocess_env(
        V0_API_URL=django_settings.V0_API_URL,
        V0_API_KEY=django_settings.V0_API_KEY,
        DJANGO_SETTINGS_MODULE="config.settings",
    )
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=60, capture_output=True)


def test_many_pages_opening_at_once_start_one_chat_each(fake_v0):
    """The opens, starts and chats are batched: each lead still gets its own chat, once, and each stream
    its own events, numbered once each."""
    fake_v0.behaviour.frame_interval = 0.5  # all still generating when the last page opens
    leads = [make_lead(email=f"lead{i}@example.com", client_ip=f"192.0.2.{i + 20}") for i in range(12)]

    async def scenario():
        opened = [Stream(stream_path(lead)).open() for lead in [*leads, leads[0]]]  # and a second tab
        streams = await asyncio.gather(*opened)
        return await asyncio.gather(*(stream.finish() for stream in streams))

    streams = run(scenario)
    assert len(fake_v0.chats) == len(leads) == len(fake_v0.requests_to("/chats/async"))
    assert len({chat.metadata["leadKey"] for chat in fake_v0.chats.values()}) == len(leads)
    for lead, stream in zip([*leads, leads[0]], streams, strict=True):
        prototype = Prototype.objects.get(lead=lead)
        numbers = [number for number, _, _ in stream.events()]
        assert numbers == list(range(1, prototype.events + 1))
        assert stream.events()[-1][1] == "complete" and prototype.state == Prototype.State.COMPLETED


def test_generations_ending_together_are_handed_over_a_few_at_a_time(fake_v0, monkeypatch):
    """A burst of hand-overs reads V0 a few at a time, so the streams still open are not queued behind
    all their answers; every prototype still completes."""
    monkeypatch.setattr(relay, "HANDOVERS_AT_ONCE", 3)
    fake_v0.behaviour.read_delay = 0.05
    leads = [make_lead(email=f"lead{i}@example.com", client_ip=f"192.0.2.{i + 20}") for i in range(12)]

    async def scenario():
        streams = await asyncio.gather(*(Stream(stream_path(lead)).open() for lead in leads))
        return await asyncio.gather(*(stream.finish() for stream in streams))

    streams = run(scenario)
    assert all(stream.events()[-1][1] == "complete" for stream in streams)
    assert Prototype.objects.filter(state=Prototype.State.COMPLETED).count() == len(leads)
    assert fake_v0.most_reads_in_flight == 3


def test_a_start_whose_answer_is_lost_leaves_the_chat_to_be_found_not_made_twice(fake_v0, settings):
    """V0 creates the chat but its answer comes too late: the relay gives up, the prototype waits without
    a chat, and the next check finds the one V0 made by our metadata."""
    fake_v0.behaviour.create_delay, settings.HTTP_READ_TIMEOUT = 1.0, 0.3
    fake_v0.behaviour.auto_finish = True
    lead = make_lead()

    async def scenario():
        stream = await Stream(stream_path(lead)).open()
        await stream.read_until("Starting your prototype")
        await relays.wait_all()
        await stream.leave()

    run(scenario)
    prototype = Prototype.objects.get()
    assert prototype.state == Prototype.State.GENERATING and not prototype.chat_id
    assert prototype.last_error == "transient: v0: timed out"
    assert len(fake_v0.chats) == 1
    fake_v0.behaviour.create_delay = 0
    run_next_check()
    prototype.refresh_from_db()
    assert prototype.chat_id == next(iter(fake_v0.chats)) and not prototype.last_error
    assert len(fake_v0.chats) == 1 and len(fake_v0.requests_to("/chats/async")) == 1


def test_a_retried_start_looks_for_the_chat_a_lost_answer_made(fake_v0, settings):
    """A start that is not the first (staff retried it) finds the chat by our metadata, on the loop."""
    fake_v0.behaviour.create_delay, settings.HTTP_READ_TIMEOUT = 1.0, 0.3
    lead = make_lead()

    async def lose_the_answer():
        stream = await Stream(stream_path(lead)).open()
        await stream.read_until("Starting your prototype")
        await relays.wait_all()
        await stream.leave()

    run(lose_the_answer)
    prototype = Prototype.objects.get()
    assert services.prototype_cancel(prototype_id=prototype.pk, actor="staff")
    assert services.prototype_retry(prototype_id=prototype.pk, actor="staff")
    assert Prototype.objects.get().state == Prototype.State.QUEUED
    fake_v0.behaviour.create_delay = 0
    retried = str(Prototype.objects.get().events).encode()  # the page reopens after the error it showed
    stream = run(lambda: _read_all(stream_path(lead), headers=[(b"last-event-id", retried)]))
    assert stream.events()[-1][1] == "complete"
    assert len(fake_v0.chats) == 1 and len(fake_v0.requests_to("/chats/async")) == 1
    assert len(fake_v0.requests_to("/chats")) == 1, "looked for by our metadata"
    assert Prototype.objects.get().chat_id == next(iter(fake_v0.chats))


@pytest.mark.parametrize(("status", "state"), [(503, Prototype.State.GENERATING), (422, Prototype.State.FAILED)])
def test_v0_refusing_the_relays_start(fake_v0, status, state):
    """Transient: it waits without a chat for the next check; permanent: the visitor is told at once."""
    fake_v0.behaviour.create_status = status
    lead = make_lead()

    async def scenario():
        stream = await Stream(stream_path(lead)).open()
        await stream.read_until("event: error" if state == Prototype.State.FAILED else "Starting your prototype")
        await relays.wait_all()
        await stream.leave()
        return stream

    run(scenario)
    prototype = Prototype.objects.get()
    assert prototype.state == state and not prototype.chat_id and f"HTTP {status}" in prototype.last_error
    assert cache.get(f"prototypes:starting:{prototype.pk}") is None, "the start lock is released"


def test_a_hand_over_that_finds_the_generation_unfinished_runs_the_full_check(fake_v0):
    """V0's stream ended without a preview (cut off at its length limit): the processor's check decides,
    here to ask V0 to continue, and the open page hears it."""
    fake_v0.behaviour.outcomes = ["length", "stop"]
    lead = make_lead()

    async def scenario():
        stream = await Stream(stream_path(lead)).open()
        await stream.read_until("Picking up where the generator stopped")
        await relays.wait_all()
        await stream.leave()

    run(scenario)
    prototype = Prototype.objects.get()
    assert prototype.state == Prototype.State.GENERATING and prototype.continue_attempts == 1
    assert fake_v0.requests_to("/messages/async") == [
        {"message": processor.CONTINUE_MESSAGE, "modelConfiguration": {"modelId": "v0-pro", "imageGenerations": False}}
    ]
    assert cache.get(f"prototypes:relay:{prototype.pk}") is None, "the lease is dropped"
