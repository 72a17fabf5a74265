"""The web process: daphne, with request bodies bounded while they arrive (config/limits.py).

    python -m config.serve [daphne's own options] config.asgi:application

Twisted, under daphne, reads a whole request body into memory or a temporary
file before the application sees any of it, whatever its size and however
slowly it comes. Here the request object daphne builds counts the body as it
arrives and answers 413 the moment it passes the route's limit (or at once
when Content-Length already does), and 408 when the body has not arrived
within REQUEST_BODY_TIMEOUT_SECONDS; either way the connection is closed and
the application never runs. daphne has no setting for either, and its server
builds its HTTP factory by name, so the factory is swapped for ours below.

Its `-b/-p` socket also listens with Twisted's default backlog of 50: when more
connections arrive at once (a thousand pages opening their progress streams,
bench/sse) the kernel drops the rest and their clients try again after 1, 3,
7 s. Ours asks for LISTEN_BACKLOG (the kernel caps it at net.core.somaxconn).
"""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django  # noqa: E402

django.setup(set_prefix=False)

from daphne import cli as daphne_cli  # noqa: E402
from daphne import server as daphne_server  # noqa: E402
from daphne.cli import CommandLineInterface  # noqa: E402
from daphne.http_protocol import HTTPFactory, WebRequest  # noqa: E402
from django.conf import settings  # noqa: E402
from twisted.internet import reactor  # noqa: E402
from twisted.web import http  # noqa: E402

from config.limits import BODY_TOO_SLOW, PAYLOAD_TOO_LARGE, body_limit  # noqa: E402


class BodyLimitedRequest(WebRequest):
    _refused = False

    def gotLength(self, length):
        path = self.channel._path.split(b"?", 1)[0].decode("latin-1")
        self._limit, self._received = body_limit(path), 0
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

    def _too_slow(self):
        self._refuse(408, b"Request Timeout", BODY_TOO_SLOW)

    def _refuse(self, status: int, reason: bytes, body: bytes):
        self._refused = True
        transport = self.channel.transport
        transport.write(
            b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
            % (status, reason, len(body), body)
        )
        transport.loseConnection()


class BodyLimitedHTTPFactory(HTTPFactory):
    def buildProtocol(self, addr):
        protocol = super().buildProtocol(addr)
        protocol.requestFactory = BodyLimitedRequest
        return protocol


daphne_server.HTTPFactory = BodyLimitedHTTPFactory

LISTEN_BACKLOG = 4096
_endpoints = daphne_cli.build_endpoint_description_strings


def _endpoints_with_backlog(*args, **kwargs):
    return [f"{e}:backlog={LISTEN_BACKLOG}" if e.startswith("tcp:") else e for e in _endpoints(*args, **kwargs)]


daphne_cli.build_endpoint_description_strings = _endpoints_with_backlog

if __name__ == "__main__":
    CommandLineInterface.entrypoint()
