"""The mailbox stand-in: Debian's dovecot serving a store's lead mailbox over IMAP, and a notifier filling it.

`Dovecot` runs one dovecot from its own config file in a directory: TLS on (implicit TLS on one port,
STARTTLS on another, plaintext login refused on both) with a self-signed certificate made at each start,
users in a passwd-file each, Maildir mail in the same directory. The system's /etc/dovecot is never read.
Without a directory it makes a temporary one and removes it on stop; a given directory (`make run`:
var/mailbox) is kept, mail and all, between runs.

Dovecot's master process runs as root here; the mail processes run as the unprivileged `dovecot` user the
Debian package creates, so the Maildir files written by `deliver` are handed to that user.

    with Dovecot() as server:
        server.add_user("leads", "secret")
        server.deliver("leads", [raw_message_bytes])
        server.imaps_port, server.ca_file ...

`Mailbox` is the StandIn: a dovecot with one account, the notifier (standins/notifier.py) dropping a
lead-notification email into it every `interval` seconds, and `settings()` pointing the product's env
mailbox (IMAP_*) at it. Alone, until Ctrl-C:

    python -m standins.mailbox --dir var/mailbox --port 9993 [--interval 180]
"""

import argparse
import contextlib
import grp
import ipaddress
import os
import pwd
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from standins.base import Received, StandIn
from standins.notifier import DEMO_STORE_EMAIL, DEMO_TRACKING_ID, INTERVAL, Notification, Notifier

DOVECOT = "/usr/sbin/dovecot"
MAIL_USER = "dovecot"
STARTUP_TIMEOUT = 20
USERNAME = "leads"
PASSWORD = "standin-imap-password"
_HOSTNAME = socket.gethostname().replace("/", "\\057").replace(":", "\\072")  # as Maildir names must spell them


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
        # Made again at each start; a year covers any `make run` left running.
        .not_valid_after(now + timedelta(days=365))
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    key_path.chmod(0o600)


CONFIG = """\
# Written by standins/mailbox.py; nothing here comes from /etc/dovecot.
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
# Local stand-in data: durability costs time and buys nothing.
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
    """One dovecot master process, its config, certificate, users and mail in one directory.

    `directory`: kept between runs when given, else a temporary one removed on stop. A port of 0 is a free one.
    """

    def __init__(self, directory: Path | str | None = None, *, imaps_port: int = 0, starttls_port: int = 0):
        self._temporary = directory is None
        self.root = Path(tempfile.mkdtemp(prefix="dovecot-")) if directory is None else Path(directory).resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        # The unprivileged mail and login processes must reach their files in here.
        self.root.chmod(0o755)
        self.config = self.root / "dovecot.conf"
        self.ca_file = self.root / "cert.pem"
        self.imaps_port = imaps_port or _free_port()
        self.starttls_port = starttls_port or _free_port()
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
        self._check_reachable()
        self._stop_left_over()
        make_self_signed_certificate(self.ca_file, self.root / "key.pem")
        for folder in ("run", "state", "home", "mail", "users"):
            (self.root / folder).mkdir(exist_ok=True)
        self.config.write_text(
            CONFIG.format(
                root=self.root,
                uid=self._uid,
                gid=self._gid,
                imaps_port=self.imaps_port,
                starttls_port=self.starttls_port,
            )
        )
        self._process = subprocess.Popen(
            [DOVECOT, "-F", "-c", str(self.config)],
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
        if self._temporary:
            shutil.rmtree(self.root, ignore_errors=True)

    def wait(self) -> int:
        """Until the master process exits; its exit code."""
        return self._process.wait()

    def _check_reachable(self):
        """The mail processes run as the `dovecot` user: every folder above the directory must let them through."""
        for parent in self.root.parents:
            if not parent.stat().st_mode & stat.S_IXOTH:
                raise RuntimeError(f"{parent} does not let other users through (chmod o+x), so dovecot's mail "
                                   f"processes, running as {MAIL_USER}, cannot reach {self.root}")  # fmt: skip

    def _stop_left_over(self):
        """A dovecot of an earlier run on a kept directory, left behind when that run was killed, holds its ports
        and its pid file: it is stopped, but only when it runs this directory's config."""
        try:
            pid = int((self.root / "run" / "master.pid").read_text().split()[0])
            command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError, IndexError):
            return
        if str(self.config).encode() not in command:
            return
        os.killpg(pid, signal.SIGTERM)  # it led its own session, so its group is every dovecot process
        deadline = time.monotonic() + 10
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.05)

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
        """A mail account (its INBOX empty when new, as it was when kept); returns (username, password)."""
        username = username or f"leads-{uuid.uuid4().hex[:10]}"
        password = password or uuid.uuid4().hex
        (self.root / "users" / f"{username}.passwd").write_text(f"{username}:{{PLAIN}}{password}::::::\n")
        maildir = self.root / "mail" / username
        for sub in ("cur", "new", "tmp"):
            (maildir / sub).mkdir(parents=True, exist_ok=True)
        self._give_to_mail_user(maildir)
        return username, password

    def deliver(self, username: str, messages, *, received_at: datetime | None = None) -> int:
        """Put raw messages into the user's INBOX as a local delivery agent does: unseen, written in tmp/ and
        moved into new/ whole, so the server never reads half a message.

        `received_at` becomes their IMAP INTERNALDATE (Maildir keeps it as the file's mtime).
        """
        maildir = self.root / "mail" / username
        stamp = (received_at or datetime.now(UTC)).timestamp()
        count = 0
        for count, raw in enumerate(messages, start=1):
            name = f"{int(stamp)}.M{count}P{os.getpid()}R{uuid.uuid4().hex[:12]}.{_HOSTNAME}"
            path = maildir / "tmp" / name
            path.write_bytes(raw.replace(b"\r\n", b"\n"))
            os.utime(path, (stamp, stamp))
            os.chown(path, self._uid, self._gid)
            path.rename(maildir / "new" / name)
        return count

    def message_count(self, username: str) -> int:
        """Messages in the user's INBOX, read or not."""
        maildir = self.root / "mail" / username
        return sum(len(os.listdir(maildir / sub)) for sub in ("cur", "new") if (maildir / sub).is_dir())

    def _give_to_mail_user(self, path: Path):
        for folder, _, files in os.walk(path):
            os.chown(folder, self._uid, self._gid)
            for name in files:
                os.chown(os.path.join(folder, name), self._uid, self._gid)
        os.chown(path.parent, self._uid, self._gid)


class Mailbox(StandIn):
    """A store's lead mailbox: a dovecot with one account that the notifier drops a lead email into every
    `interval` seconds (None: never; `notify()` drops one at once either way).

    `directory`: kept between runs when given (mail, and so the notifier's numbering, go on from the last run),
    else a temporary one. `port`: its implicit-TLS IMAP port, 0 for a free one. `tracking_id` and
    `store_email` name the store the emails are for (by default the demo store of `manage.py load_demo`).
    """

    name = "mailbox"

    def __init__(
        self,
        directory: Path | str | None = None,
        *,
        port: int = 0,
        username: str = USERNAME,
        password: str = PASSWORD,
        interval: float | None = INTERVAL,
        tracking_id: str = DEMO_TRACKING_ID,
        store_email: str = DEMO_STORE_EMAIL,
        seed: int | None = None,
    ):
        super().__init__()
        self.server = Dovecot(directory, imaps_port=port)
        self.username = username
        self.password = password
        self.interval = interval
        self.notifier = Notifier(
            self._drop, interval=interval or INTERVAL, tracking_id=tracking_id, store_email=store_email, seed=seed
        )

    def start(self) -> "Mailbox":
        self.server.start()
        try:
            self.server.add_user(self.username, self.password)
            self.notifier.number = self.server.message_count(self.username)
        except BaseException:
            self.server.stop()
            raise
        if self.interval is not None:
            self.notifier.start()
        return self

    def stop(self) -> None:
        self.notifier.stop()
        self.server.stop()

    def settings(self) -> dict[str, str]:
        # The env mailbox's own host and port are always allowed (tracking.selectors.imap_allowed_endpoints):
        # IMAP_ALLOWED_HOSTS is only for admin Mailbox rows.
        return {
            "IMAP_HOST": self.server.host,
            "IMAP_PORT": str(self.server.imaps_port),
            "IMAP_SSL": "true",
            "IMAP_USER": self.username,
            "IMAP_PASSWORD": self.password,
            "IMAP_FOLDER": "INBOX",
            "IMAP_CA_FILE": str(self.server.ca_file),
        }

    def notify(self) -> Notification:
        """Drop the next lead notification now."""
        notification = self.notifier.next()
        self._drop(notification)
        return notification

    def _drop(self, notification: Notification) -> None:
        message = notification.message
        self.server.deliver(self.username, [message.as_bytes()])
        text, page = message.get_body(("plain",)), message.get_body(("html",))
        self.record(
            Received(
                service=self.name,
                kind="email",
                title=str(message["Subject"]),
                body=text.get_content() if text is not None else "",
                html=page.get_content() if page is not None else "",
                detail={
                    "from": str(message["From"]),
                    "to": str(message["To"]),
                    "format": notification.kind,
                    "lead": notification.lead,
                },
            )
        )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description="A local IMAP mailbox (dovecot) that receives a lead-notification email every few minutes. "
        "Prints the IMAP_* settings that point the product at it, one NAME=value a line, then serves until Ctrl-C."
    )
    parser.add_argument("--dir", type=Path, help="where its mail, config and certificate live, kept between runs "
                        "(default: a temporary directory, removed on exit)")  # fmt: skip
    parser.add_argument("--port", type=int, default=0, help="the implicit-TLS IMAP port (default: a free one)")
    parser.add_argument("--interval", type=float, default=INTERVAL, help="seconds between lead emails")
    args = parser.parse_args(argv)
    # Stopped by Ctrl-C, honcho or kill alike; SIGINT set too, as a shell's background job inherits it ignored.
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.default_int_handler)
    mailbox = Mailbox(args.dir, port=args.port, interval=args.interval)
    with contextlib.suppress(KeyboardInterrupt), mailbox:
        for name, value in mailbox.settings().items():
            print(f"{name}={value}", flush=True)
        code = mailbox.server.wait()
        sys.exit(f"dovecot exited with code {code}:\n{mailbox.server.log()[-2000:]}")


if __name__ == "__main__":
    main()
