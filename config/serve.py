"""The web process: daphne, with request bodies bounded while they arrive (foundation/limits.py).

    python -m config.serve [daphne's own options] config.asgi:application

Twisted, under daphne, reads a whole request body into memory or a temporary
file before the application sees any of it, whatever its size and however
slowly it comes. Here the request object daphne builds counts the body as it
arrives and answers 413 the moment it passes the route's limit (or at once
when Content-Length already does), and 408 when the body has not arrived
within REQUEST_BODY_TIMEOUT_SECONDS; either way the connection is closed and
the application never runs. daphne has no setting for either, and its server
builds its HTTP factory by name, so the factory is swapped for ours below.

Before any body, Twisted's only clock on a connection is its idle timeout,
which every byte resets: a client sending a header line every few seconds holds a
connection for as long as it likes. Here a request's head (request line and
headers) must be complete within REQUEST_HEAD_TIMEOUT_SECONDS of the
connection's opening, or on a kept-alive connection of the next request's
first byte: else 408 and the connection is closed (just closed when nothing of
a request came). Between requests a kept-alive connection is closed after
Twisted's idle timeout (60 s).

And one client address (an IPv6 client per /64, as the throttles count) may
hold at most MAX_CONNECTIONS_PER_IP connections to the process at once; one
more is answered 429 at once and closed, without its request being read. The
address is the socket's peer: behind trusted proxies (TRUSTED_PROXY_COUNT) it
is a proxy's, so there the cap is off by default and limiting each client's
connections is the proxy's job (nginx's limit_conn, the load balancer's).

Its `-b/-p` socket also listens with Twisted's default backlog of 50: when more
connections arrive at once (a thousand pages opening their progress streams,
bench/sse) the kernel drops the rest and their clients try again after 1, 3,
7 s. Ours asks for LISTEN_BACKLOG (the kernel caps it at net.core.somaxconn).
"""

import collections
import os
from urllib.parse import unquote

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django  # noqa: E402

django.setup(set_prefix=False)

from daphne import cli as daphne_cli  # noqa: E402
from daphne import server as daphne_server  # noqa: E402
from daphne.cli import CommandLineInterface  # noqa: E402
from daphne.http_protocol import HTTPFactory, WebRequest  # noqa: E402
from django.conf import settings  # noqa: E402
from twisted.internet import reactor  # noqa: E402
from twisted.internet.interfaces import IProtocolNegotiationFactory  # noqa: E402
from twisted.internet.protocol import Protocol  # noqa: E402
from twisted.protocols.policies import WrappingFactory  # noqa: E402
from twisted.web import http  # noqa: E402
from zope.interface import implementer  # noqa: E402

from foundation.client_ip import address_bucket  # noqa: E402
from foundation.limits import (  # noqa: E402
    BODY_TOO_SLOW,
    HEAD_TOO_SLOW,
    PAYLOAD_TOO_LARGE,
    TOO_MANY_CONNECTIONS,
    TOO_MANY_CONNECTIONS_RETRY_SECONDS,
    body_limit,
)


def _answer(status: int, reason: bytes, body: bytes, headers: bytes = b"") -> bytes:
    """A whole JSON response that closes its connection, written straight to a transport."""
    return (
        b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n%s\r\n%s"
        % (status, reason, len(body), headers, body)
    )


class BodyLimitedRequest(WebRequest):
    _refused = False

    def gotLength(self, length):
        self._limit, self._received = body_limit(*self._scope_paths()), 0
        super().gotLength(length)
        if length is not None and length > self._limit:
            self._refuse(413, b"Payload Too Large", PAYLOAD_TOO_LARGE)
            return
        self._deadline = reactor.callLater(settings.REQUEST_BODY_TIMEOUT_SECONDS, self._too_slow)

    def handleContentChunk(self, data):
        if self._refused:
            return
        self._received += len(data)
        if self._received > self._limit:
            self._refuse(413, b"Payload Too Large", PAYLOAD_TOO_LARGE)
            return
        super().handleContentChunk(data)

    def requestReceived(self, command, path, version):
        deadline = getattr(self, "_deadline", None)
        if deadline is not None and deadline.active():
            deadline.cancel()
        if self._refused:
            return
        super().requestReceived(command, path, version)

    def connectionLost(self, reason):
        deadline = getattr(self, "_deadline", None)
        if deadline is not None and deadline.active():
            deadline.cancel()
        if not self._refused:
            super().connectionLost(reason)
            return
        # Refused before daphne's process(): nothing was handed to the application (no client_addr yet).
        http.Request.connectionLost(self, reason)
        self.server.protocol_disconnected(self)

    def _scope_paths(self) -> tuple[str, str]:
        """The `path` and `root_path` daphne's WebRequest.process will give the application: the path
        percent-decoded, the root path from a Daphne-Root-Path header if the client sent one."""
        root_path = self.channel.factory.server.root_path
        try:
            if named := self.requestHeaders.getRawHeaders(b"daphne-root-path"):
                root_path = unquote(named[-1].decode("ascii"))
            return unquote(self.channel._path.split(b"?", 1)[0].decode("ascii")), root_path
        except UnicodeDecodeError:  # daphne refuses the request before the application sees it
            return "", ""

    def _too_slow(self):
        self._refuse(408, b"Request Timeout", BODY_TOO_SLOW)

    def _refuse(self, status: int, reason: bytes, body: bytes):
        self._refused = True
        transport = self.channel.transport
        transport.write(_answer(status, reason, body))
        transport.loseConnection()


class HeadBoundedChannel(http.HTTPChannel):
    """Twisted's HTTP/1.1 channel, with each request's head bounded by REQUEST_HEAD_TIMEOUT_SECONDS (the module
    docstring). Once the head is complete, BodyLimitedRequest's own clock takes over."""

    _awaiting_head = True  # from the connection's opening, and again after each response, until a head is complete
    _head_started = False  # some of that head came
    _head_deadline = None

    def connectionMade(self):
        super().connectionMade()
        self._start_head_clock()

    def dataReceived(self, data):
        if self._awaiting_head:
            self._head_started = True
            if self._head_deadline is None:  # the first byte of a kept-alive connection's next request
                self._start_head_clock()
        super().dataReceived(data)

    def allHeadersReceived(self):
        self._awaiting_head = False
        self._stop_head_clock()
        super().allHeadersReceived()

    def requestDone(self, request):
        if self.persistent:
            self._awaiting_head, self._head_started = True, bool(self._dataBuffer)
            if self._head_started:  # the client sent its next request already: its head is read now
                self._start_head_clock()
        super().requestDone(request)

    def connectionLost(self, reason):
        self._stop_head_clock()
        super().connectionLost(reason)

    def _start_head_clock(self):
        self._head_deadline = self.callLater(settings.REQUEST_HEAD_TIMEOUT_SECONDS, self._head_too_slow)

    def _stop_head_clock(self):
        if self._head_deadline is not None and self._head_deadline.active():
            self._head_deadline.cancel()
        self._head_deadline = None

    def _head_too_slow(self):
        self._head_deadline = None
        if self._head_started:
            self.transport.write(_answer(408, b"Request Timeout", HEAD_TOO_SLOW))
        self.loseConnection()


class BodyLimitedHTTPFactory(HTTPFactory):
    def protocol(self):
        # What Twisted's HTTPFactory builds, on our channel.
        return http._GenericHTTPChannelProtocol(HeadBoundedChannel())

    def buildProtocol(self, addr):
        protocol = super().buildProtocol(addr)
        protocol.requestFactory = BodyLimitedRequest
        return protocol


@implementer(IProtocolNegotiationFactory)
class ConnectionsPerClient(WrappingFactory):
    """At most `limit` connections from one client address at once (the module docstring). The count follows
    the socket, not the HTTP channel: a connection upgraded to a WebSocket is handed to another protocol, and
    the wrapper still sees it close. (Twisted's LimitConnectionsByPeer counts by the address's type, not its host.)"""

    def __init__(self, wrapped, limit: int):
        super().__init__(wrapped)
        self.limit = limit
        self.open: collections.Counter[str] = collections.Counter()

    def buildProtocol(self, addr):
        client = _client_of(addr)
        if client is not None and self.open[client] >= self.limit:
            return TooManyConnections()
        protocol = super().buildProtocol(addr)
        protocol.client = client
        return protocol

    def registerProtocol(self, protocol):
        super().registerProtocol(protocol)
        if protocol.client is not None:
            self.open[protocol.client] += 1

    def unregisterProtocol(self, protocol):
        super().unregisterProtocol(protocol)
        if protocol.client is not None:
            self.open[protocol.client] -= 1
            if not self.open[protocol.client]:
                del self.open[protocol.client]

    def acceptableProtocols(self):
        return self.wrappedFactory.acceptableProtocols()


def _client_of(addr) -> str | None:
    host = getattr(addr, "host", None)  # None on a UNIX socket
    if host is None:
        return None
    try:
        return address_bucket(host)
    except ValueError:  # an IPv6 address with a zone: counted as it is
        return host


class TooManyConnections(Protocol):
    def connectionMade(self):
        retry = b"Retry-After: %d\r\n" % TOO_MANY_CONNECTIONS_RETRY_SECONDS
        self.transport.write(_answer(429, b"Too Many Requests", TOO_MANY_CONNECTIONS, retry))
        self.transport.loseConnection()


def web_factory(server):
    """daphne's HTTP factory, as daphne's Server calls it."""
    factory = BodyLimitedHTTPFactory(server)
    limit = settings.MAX_CONNECTIONS_PER_IP
    return ConnectionsPerClient(factory, limit) if limit > 0 else factory


daphne_server.HTTPFactory = web_factory

LISTEN_BACKLOG = 4096
_endpoints = daphne_cli.build_endpoint_description_strings


def _endpoints_with_backlog(*args, **kwargs):
    return [f"{e}:backlog={LISTEN_BACKLOG}" if e.startswith("tcp:") else e for e in _endpoints(*args, **kwargs)]


daphne_cli.build_endpoint_description_strings = _endpoints_with_backlog

if __name__ == "__main__":
    CommandLineInterface.entrypoint()
