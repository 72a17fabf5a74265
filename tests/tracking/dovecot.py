"""A throwaway dovecot IMAP server for tests and benchmarks.

It runs from its own config file in a temporary directory: TLS on (implicit
TLS on one port, STARTTLS on another, plaintext login refused on both) with a
self-signed certificate made here, users in a passwd-file, Maildir mail in the
same directory. The system's /etc/dovecot is never read.

Dovecot's master process runs as root here; the mail processes run as the
unprivileged `dovecot` user the Debian package creates, so the Maildir files
written by `deliver` are handed to that user.

    with Dovecot() as server:
        server.add_user("leads", "secret")
        server.deliver("leads", [raw_message_bytes])
        server.imaps_port, server.ca_file ...
"""

import grp
import ipaddress
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

DOVECOT = "/usr/sbin/dovecot"
MAIL_USER = "dovecot"
STARTUP_TIMEOUT = 20


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def make_self_signed_certificate(cert_path: Path, key_path: Path) -> None:
    """A certificate for localhost and 127.0.0.1 that clients trust by loading it as their CA."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.now(UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=2))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    key_path.chmod(0o600)


CONFIG = """\
# Written by tests/tracking/dovecot.py; nothing here comes from /etc/dovecot.
base_dir = {root}/run
state_dir = {root}/state
log_path = {root}/dovecot.log
protocols = imap
listen = 127.0.0.1
default_internal_user = dovecot
default_login_user = dovenull
first_valid_uid = 1
ssl = required
ssl_cert = <{root}/cert.pem
ssl_key = <{root}/key.pem
ssl_min_protocol = TLSv1.2
# ECDHE only: no Diffie-Hellman parameters file is needed.
ssl_cipher_list = ECDHE+AESGCM:ECDHE+CHACHA20
disable_plaintext_auth = yes
auth_mechanisms = plain login
passdb {{
  driver = passwd-file
  # One file per user: dovecot notices a new file at once, while edits to one shared file
  # within the same second (and of the same size) can go unnoticed.
  args = scheme=PLAIN username_format=%n {root}/users/%n.passwd
}}
userdb {{
  driver = static
  args = uid={uid} gid={gid} home={root}/home/%u
}}
mail_location = maildir:{root}/mail/%u
# Throwaway data: durability costs time and buys nothing.
mail_fsync = never
mail_max_userip_connections = 50
# Tests try wrong passwords on purpose: no delay after a failed login, and no growing
# per-IP penalty (the documented way to turn it off is to close its listener).
auth_failure_delay = 0
service anvil {{
  unix_listener anvil-auth-penalty {{
    mode = 0
  }}
}}
service imap-login {{
  inet_listener imap {{
    address = 127.0.0.1
    port = {starttls_port}
  }}
  inet_listener imaps {{
    address = 127.0.0.1
    port = {imaps_port}
    ssl = yes
  }}
}}
"""


class Dovecot:
    """One dovecot master process, its config, certificate, users and mail in a temporary directory."""

    def __init__(self):
        self.root = Path(tempfile.mkdtemp(prefix="dovecot-"))
        # The unprivileged mail and login processes must reach their files in here.
        self.root.chmod(0o755)
        self.ca_file = self.root / "cert.pem"
        self.imaps_port = _free_port()
        self.starttls_port = _free_port()
        self.host = "127.0.0.1"
        self._process = None
        self._uid = pwd.getpwnam(MAIL_USER).pw_uid
        self._gid = grp.getgrnam(MAIL_USER).gr_gid

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc_info):
        self.stop()

    def start(self):
        make_self_signed_certificate(self.ca_file, self.root / "key.pem")
        for folder in ("run", "state", "home", "mail", "users"):
            (self.root / folder).mkdir()
        config = self.root / "dovecot.conf"
        config.write_text(
            CONFIG.format(
                root=self.root,
                uid=self._uid,
                gid=self._gid,
                imaps_port=self.imaps_port,
                starttls_port=self.starttls_port,
            )
        )
        self._process = subprocess.Popen(
            [DOVECOT, "-F", "-c", str(config)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while not (self._listening(self.imaps_port) and self._listening(self.starttls_port)):
            if self._process.poll() is not None:
                raise RuntimeError(f"dovecot exited: {self._process.stderr.read().decode()}\n{self.log()}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"dovecot did not listen within {STARTUP_TIMEOUT}s\n{self.log()}")
            time.sleep(0.05)

    def stop(self):
        if self._process is not None and self._process.poll() is None:
            os.killpg(self._process.pid, signal.SIGTERM)
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self._process.pid, signal.SIGKILL)
                self._process.wait(timeout=10)
        if self._process is not None:
            self._process.stderr.close()
        self._process = None
        shutil.rmtree(self.root, ignore_errors=True)

    @property
    def pid(self) -> int:
        """The master process, leader of the process group of every dovecot process."""
        return self._process.pid

    def log(self) -> str:
        path = self.root / "dovecot.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def _listening(self, port) -> bool:
        try:
            with socket.create_connection((self.host, port), timeout=0.2):
                return True
        except OSError:
            return False

    def add_user(self, username: str | None = None, password: str | None = None) -> tuple[str, str]:
        """A new mail account with an empty INBOX; returns (username, password)."""
        username = username or f"leads-{uuid.uuid4().hex[:10]}"
        password = password or uuid.uuid4().hex
        (self.root / "users" / f"{username}.passwd").write_text(f"{username}:{{PLAIN}}{password}::::::\n")
        maildir = self.root / "mail" / username
        for sub in ("cur", "new", "tmp"):
            (maildir / sub).mkdir(parents=True)
        self._give_to_mail_user(maildir)
        return username, password

    def deliver(self, username: str, messages, *, received_at: datetime | None = None) -> int:
        """Put raw messages into the user's INBOX as a local delivery agent would: unseen, in new/.

        `received_at` becomes their IMAP INTERNALDATE (Maildir keeps it as the file's mtime).
        """
        new = self.root / "mail" / username / "new"
        stamp = (received_at or datetime.now(UTC)).timestamp()
        count = 0
        for count, raw in enumerate(messages, start=1):
            path = new / f"{int(stamp)}.M{count}P{os.getpid()}R{uuid.uuid4().hex[:12]}.bench"
            path.write_bytes(raw.replace(b"\r\n", b"\n"))
            os.utime(path, (stamp, stamp))
            os.chown(path, self._uid, self._gid)
        return count

    def _give_to_mail_user(self, path: Path):
        for folder, _, files in os.walk(path):
            os.chown(folder, self._uid, self._gid)
            for name in files:
                os.chown(os.path.join(folder, name), self._uid, self._gid)
        os.chown(path.parent, self._uid, self._gid)
