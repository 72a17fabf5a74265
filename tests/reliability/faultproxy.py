"""A TCP fault proxy between our HTTP clients and a fake upstream, deciding a fault per HTTP request.

Written here with asyncio streams: toxiproxy (the well-kept tool for this) is
a Go server outside our package registries, and its toxics act on byte
streams per proxy, while these scenarios need per-request faults that know
where a request and a response end, above all "the upstream applied the
request, then the answer was lost", which a byte-level toxic cannot aim at.

The proxy frames HTTP/1.1 messages just enough to forward them (headers, then
a Content-Length or chunked body; a response without either runs to EOF).
For each request it draws one fault from its `FaultPlan`:

- "latency": forwarded both ways after a delay;
- "reset_before": the connection is reset before the request reaches upstream;
- "reset_after": the request is applied upstream, then the client's connection
  is reset instead of answering;
- "reset_mid_response": the upstream's answer is cut in the middle, then reset;
- "timeout": the request is applied upstream and the answer withheld (the
  client's read timeout fires);
- "half_open": the request is swallowed, never forwarded, nothing answered and
  the connection left open;
- "http_503": a 503 answered by the proxy itself, upstream untouched.

A request that upgrades the connection (a WebSocket handshake) gets the same
draw; once upstream answers 101 the proxy relays raw bytes both ways, and two
more faults act on that stream, after a random number (`FaultPlan.cut_frames`)
of the upstream's WebSocket frames has reached the client:

- "drop_mid_stream": both connections reset, no close frame (a crashed peer);
- "stall_mid_stream": nothing more is forwarded and the connections stay open.

Counts of the faults injected are kept per kind (`stats`).
"""

import asyncio
import random
import socket
import struct
import threading
from collections import Counter
from dataclasses import dataclass, field

FAULTS = ("latency", "reset_before", "reset_after", "reset_mid_response", "timeout", "half_open", "http_503")
STREAM_FAULTS = ("drop_mid_stream", "stall_mid_stream")  # for upgraded (WebSocket) connections


@dataclass
class FaultPlan:
    """Which share of requests get a fault, and which faults; `rate=0` forwards everything as is."""

    rate: float = 0.0
    faults: tuple[str, ...] = FAULTS
    latency_seconds: float = 0.2
    # A request whose first line contains one of these is never faulted (e.g. a fake's own admin reads).
    spare: tuple[str, ...] = ()
    seed: int | None = None
    # A stream fault acts after this many upstream WebSocket frames (drawn between the two, inclusive).
    cut_frames: tuple[int, int] = (1, 8)
    rng: random.Random = field(init=False)

    def __post_init__(self):
        self.rng = random.Random(self.seed)

    def draw(self, request_line: str) -> str | None:
        if any(part in request_line for part in self.spare):
            return None
        if self.rng.random() >= self.rate:
            return None
        return self.rng.choice(self.faults)


class FaultProxy:
    """Listens on 127.0.0.1:<port> and forwards to `upstream` (host, port), in a thread of its own."""

    def __init__(self, upstream: tuple[str, int], plan: FaultPlan | None = None):
        self.upstream = upstream
        self.plan = plan or FaultPlan()
        self.stats: Counter = Counter()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="fault-proxy", daemon=True)
        self._held: list[asyncio.StreamWriter] = []  # half-open connections, kept open until stop
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "FaultProxy":
        self._thread.start()
        self._ready.wait(10)
        return self

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def _serve(self):
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            server.close()
            # Connections still relayed end with the proxy, each through its own cleanup, and held ones are
            # closed: left to the garbage collector, they would close on a loop already gone.
            tasks = asyncio.all_tasks(self._loop)
            for task in tasks:
                task.cancel()
            self._loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            for writer in self._held:
                writer.close()
            self._loop.run_until_complete(asyncio.sleep(0))  # the transports' close callbacks
            self._loop.close()

    async def _handle(self, client_reader, client_writer):
        upstream_writer = None
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(*self.upstream)
            while True:
                request = await read_message(client_reader, is_response=False)
                if request is None:
                    return
                fault = self.plan.draw(request.split(b"\r\n", 1)[0].decode("latin-1"))
                self.stats[fault or "none"] += 1
                if fault == "http_503":
                    client_writer.write(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n")
                    await client_writer.drain()
                    continue
                if fault == "reset_before":
                    return reset(client_writer)
                if fault == "half_open":
                    self._held.append(client_writer)
                    client_writer = None
                    return
                if fault == "latency":
                    await asyncio.sleep(self.plan.latency_seconds)
                upstream_writer.write(request)
                await upstream_writer.drain()
                if b"\r\nupgrade:" in request.split(b"\r\n\r\n", 1)[0].lower():
                    held = await self._tunnel(fault, client_reader, client_writer, upstream_reader, upstream_writer)
                    if held:
                        client_writer = None
                    return
                response = await read_message(upstream_reader, is_response=True)
                if response is None:
                    return reset(client_writer)
                if fault == "reset_after":
                    return reset(client_writer)
                if fault == "timeout":
                    self._held.append(client_writer)
                    client_writer = None
                    return
                if fault == "reset_mid_response":
                    client_writer.write(response[: max(1, len(response) // 2)])
                    await client_writer.drain()
                    return reset(client_writer)
                if fault == "latency":
                    await asyncio.sleep(self.plan.latency_seconds)
                client_writer.write(response)
                await client_writer.drain()
                if b"\r\nconnection: close" in response.split(b"\r\n\r\n", 1)[0].lower():
                    return
        except (ConnectionError, asyncio.IncompleteReadError, OSError):
            return
        finally:
            if upstream_writer is not None:
                upstream_writer.close()
            if client_writer is not None and not client_writer.is_closing():
                client_writer.close()

    async def _tunnel(self, fault, client_reader, client_writer, upstream_reader, upstream_writer) -> bool:
        """Relay an upgraded connection byte for byte, applying a stream fault; True when the client's
        connection is held open (stalled), for `stop` to close."""
        head = await upstream_reader.readuntil(b"\r\n\r\n")
        if fault in ("reset_after", "reset_mid_response"):
            reset(client_writer)
            return False
        if fault == "timeout":
            self._held.append(client_writer)
            return True
        client_writer.write(head)
        await client_writer.drain()
        if not head.startswith(b"HTTP/1.1 101"):
            return False
        cut = self.plan.rng.randint(*self.plan.cut_frames) if fault in STREAM_FAULTS else None

        async def client_to_upstream():
            while data := await client_reader.read(65536):
                upstream_writer.write(data)
                await upstream_writer.drain()

        async def upstream_to_client():
            frames = 0
            while True:
                frame = await read_ws_frame(upstream_reader)
                if frame is None:
                    return
                if cut is not None and frames >= cut:
                    return
                client_writer.write(frame)
                await client_writer.drain()
                frames += 1

        upward = asyncio.ensure_future(client_to_upstream())
        try:
            await upstream_to_client()
        except (ConnectionError, asyncio.IncompleteReadError, OSError):
            pass
        finally:
            upward.cancel()
        if fault == "stall_mid_stream":
            self._held.append(client_writer)
            return True
        if fault == "drop_mid_stream":
            reset(client_writer)
        return False


async def read_ws_frame(reader: asyncio.StreamReader) -> bytes | None:
    """One WebSocket frame (RFC 6455 section 5.2) as raw bytes, or None at EOF before it starts."""
    try:
        head = await reader.readexactly(2)
    except asyncio.IncompleteReadError:
        return None
    length = head[1] & 0x7F
    extra = b""
    if length == 126:
        extra = await reader.readexactly(2)
        length = struct.unpack("!H", extra)[0]
    elif length == 127:
        extra = await reader.readexactly(8)
        length = struct.unpack("!Q", extra)[0]
    mask = await reader.readexactly(4) if head[1] & 0x80 else b""
    return head + extra + mask + await reader.readexactly(length)


def reset(writer: asyncio.StreamWriter) -> None:
    """Close with an RST (SO_LINGER 0), as a crashed peer or a middlebox would."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


async def read_message(reader: asyncio.StreamReader, *, is_response: bool) -> bytes | None:
    """One HTTP/1.1 message as raw bytes, or None at a clean EOF before it starts."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            return None
        raise
    headers = {}
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        headers[name.strip().lower()] = value.strip()
    if b"content-length" in headers:
        return head + await reader.readexactly(int(headers[b"content-length"]))
    if headers.get(b"transfer-encoding", b"").lower() == b"chunked":
        body = b""
        while True:
            size_line = await reader.readuntil(b"\r\n")
            size = int(size_line.split(b";")[0], 16)
            body += size_line + await reader.readexactly(size + 2)
            if size == 0:
                return head + body
    if is_response and not head.startswith((b"HTTP/1.1 204", b"HTTP/1.1 304")):
        return head + await reader.read()  # no framing: the body runs to EOF
    return head
