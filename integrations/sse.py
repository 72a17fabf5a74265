"""Server-sent events read from an aiohttp response body, for the clients that stream (agent, V0).

The parts of the format (html.spec.whatwg.org, "Server-sent events") these
answers use: `data:` lines joined by newlines, an `event:` name (`message`
unless given), a blank line ending each event; comments, `id:` and `retry:`
are skipped, an event without data is not dispatched, nor one the stream ends
before its blank line.

Written here because no maintained SSE reader works on an aiohttp body with a bound on each line (httpx-sse
reads httpx responses only, and aiohttp-sse-client is no longer kept); the format is a few lines of parsing.
"""

from collections.abc import AsyncIterator

import aiohttp
from aiohttp.http_exceptions import LineTooLong

from jobs import PermanentError


async def sse_events(content: aiohttp.StreamReader, *, service: str, max_bytes: int) -> AsyncIterator[tuple[str, str]]:
    """(event name, data) per event; a line or an event's data over `max_bytes` raises PermanentError."""
    event, data, size = "", [], 0
    while True:
        try:
            line = await content.readline(max_line_length=max_bytes)
        except LineTooLong as exc:
            raise PermanentError(f"{service}: stream frame too large") from exc
        if not line:
            return
        text = line.decode("utf-8", errors="replace").rstrip("\r\n")
        if not text:
            if data:
                yield event or "message", "\n".join(data)
            event, data, size = "", [], 0
            continue
        name, _, value = text.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            size += len(value) + 1
            if size > max_bytes:
                raise PermanentError(f"{service}: stream frame too large")
            data.append(value)
        elif name == "event":
            event = value
