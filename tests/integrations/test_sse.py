"""The server-sent events reader against a real local HTTP server: events as the format defines them, bounded."""

import asyncio

import aiohttp
import pytest

from integrations.sse import sse_events
from jobs import PermanentError


def read(httpserver, body: str, max_bytes: int = 1024) -> list[tuple[str, str]]:
    httpserver.expect_request("/stream").respond_with_data(body, content_type="text/event-stream")

    async def run():
        async with aiohttp.ClientSession() as session, session.get(httpserver.url_for("/stream")) as response:
            return [event async for event in sse_events(response.content, service="test", max_bytes=max_bytes)]

    return asyncio.run(run())


def test_events_are_their_data_lines_joined_under_their_name(httpserver):
    body = 'event: RunContent\ndata: 1\n\n: a comment\ndata: x\ndata:y\r\n\r\nid: 3\nretry: 5\n\ndata: {"k": 1}\n\n'
    assert read(httpserver, body) == [("RunContent", "1"), ("message", "x\ny"), ("message", '{"k": 1}')]


def test_an_event_the_stream_ends_before_its_blank_line_is_not_dispatched(httpserver):
    assert read(httpserver, "data: 1\n\ndata: 2") == [("message", "1")]


@pytest.mark.parametrize("body", ["data: " + "x" * 2000 + "\n\n", "data: 1234567\n" * 200 + "\n"])
def test_a_line_or_an_event_over_the_bound_is_refused(httpserver, body):
    with pytest.raises(PermanentError, match="test: stream frame too large"):
        read(httpserver, body, max_bytes=1024)
