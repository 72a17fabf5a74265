"""A fake IMAP server over implicit TLS that records every line a client sends and refuses every login.

It answers the way RFC 3501 servers do (greeting with capabilities, tagged
OK/NO/BAD, BYE on LOGOUT), which is all imapclient needs to reach LOGIN. A test
points a mailbox at it and reads `lines` / `logins` to see whether a password
was sent there.
"""

import socket
import ssl
import tempfile
import threading
from pathlib import Path

from standins.mailbox import make_self_signed_certificate


class FakeImapServer:
    def __init__(self):
        self._dir = tempfile.TemporaryDirectory()
        cert, key = Path(self._dir.name) / "cert.pem", Path(self._dir.name) / "key.pem"
        make_self_signed_certificate(cert, key)
        self.ca_file = str(cert)
        self._context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._context.load_cert_chain(cert, key)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self.host, self.port = "127.0.0.1", self._listener.getsockname()[1]
        self.connections = 0
        self.lines: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def logins(self) -> list[str]:
        return [line for line in self.lines if line.split(" ", 2)[1:2] == ["LOGIN"]]

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc_info):
        self._stop.set()
        self._listener.close()
        self._thread.join(timeout=5)
        self._dir.cleanup()

    def _serve(self):
        while not self._stop.is_set():
            try:
                raw, _ = self._listener.accept()
            except (TimeoutError, OSError):
                continue
            self.connections += 1
            threading.Thread(target=self._session, args=(raw,), daemon=True).start()

    def _session(self, raw: socket.socket):
        try:
            with self._context.wrap_socket(raw, server_side=True) as conn:
                conn.settimeout(5)
                reader = conn.makefile("rb")
                conn.sendall(b"* OK [CAPABILITY IMAP4rev1 AUTH=PLAIN] fake ready\r\n")
                for line in reader:
                    text = line.decode("utf-8", "replace").rstrip("\r\n")
                    self.lines.append(text)
                    tag, _, rest = text.partition(" ")
                    command = rest.split(" ", 1)[0].upper()
                    if command == "CAPABILITY":
                        conn.sendall(b"* CAPABILITY IMAP4rev1 AUTH=PLAIN\r\n" + f"{tag} OK done\r\n".encode())
                    elif command == "LOGIN":
                        conn.sendall(f"{tag} NO [AUTHENTICATIONFAILED] Authentication failed.\r\n".encode())
                    elif command == "LOGOUT":
                        conn.sendall(b"* BYE logging out\r\n" + f"{tag} OK done\r\n".encode())
                        return
                    else:
                        conn.sendall(f"{tag} BAD unknown command\r\n".encode())
        except (OSError, ssl.SSLError):
            return
