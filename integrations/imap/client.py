"""An IMAP client over imapclient: TLS always (implicit, or STARTTLS), UIDs, batch fetches.

It speaks IMAP and nothing else (no ORM). Failures come out as the job
layer's two kinds: a refused login, a failed certificate check or a missing
folder are permanent (someone must fix the settings); timeouts, dropped
connections and other server errors are transient. Error texts carry the
mailbox name and the error type only, never addresses or message content.
"""

import ssl
from dataclasses import dataclass, field
from datetime import date, datetime

from imapclient import SEEN, IMAPClient
from imapclient.exceptions import IMAPClientAbortError, IMAPClientError, LoginError

from jobs import PermanentError, TransientError


@dataclass(frozen=True)
class MailboxSettings:
    name: str
    host: str
    username: str
    password: str = field(repr=False)
    port: int = 993
    folder: str = "INBOX"
    use_ssl: bool = True  # False: STARTTLS on a plain port; plaintext is never used


@dataclass(frozen=True)
class FetchedMessage:
    uid: int
    raw: bytes  # the whole message, or only the start of its header when it is over the size limit
    internal_date: datetime | None  # when the server received it, time-zone aware
    size: int | None = None  # RFC822.SIZE
    header_only: bool = False  # over the size limit: the body was never fetched


IMAP_PORTS = (993, 143)  # what an allowlist entry without a port permits


def endpoint_allowed(host: str, port: int, allowed: frozenset[str]) -> bool:
    host = host.strip().lower().rstrip(".")
    return f"{host}:{port}" in allowed or (host in allowed and port in IMAP_PORTS)


class ImapClient:
    """One logged-in session on one folder. Use as a context manager."""

    def __init__(
        self, mailbox: MailboxSettings, *, timeout: float, ca_file: str = "", allowed: frozenset[str] | None = None
    ):
        """`allowed`: the `host` / `host:port` entries a login may go to, checked before any connection."""
        self.mailbox = mailbox
        self.allowed = allowed
        self.timeout = timeout
        self.ca_file = ca_file
        self.uidvalidity: int | None = None
        self._client: IMAPClient | None = None

    def __enter__(self):
        self.connect()
        return self

    def __exit__(self, *exc_info):
        self.close()

    def connect(self):
        mailbox = self.mailbox
        if self.allowed is not None and not endpoint_allowed(mailbox.host, mailbox.port, self.allowed):
            # No socket is opened: the error says nothing about the host either (no port scanning through it).
            raise PermanentError(f"imap {mailbox.name}: the host is not an allowed IMAP host")
        context = ssl.create_default_context(cafile=self.ca_file or None)
        try:
            client = IMAPClient(
                mailbox.host, port=mailbox.port, ssl=mailbox.use_ssl, ssl_context=context, timeout=self.timeout
            )
        except ssl.SSLCertVerificationError as exc:
            raise PermanentError(f"imap {mailbox.name}: the server's TLS certificate is not trusted") from exc
        except (OSError, IMAPClientError) as exc:
            raise TransientError(f"imap {mailbox.name}: cannot connect ({type(exc).__name__})") from exc
        self._client = client
        # Aware datetimes as the server sent them, not converted to this machine's local time.
        client.normalise_times = False
        try:
            if not mailbox.use_ssl:
                client.starttls(context)
            client.login(mailbox.username, mailbox.password)
        except LoginError as exc:
            self.close()
            raise PermanentError(f"imap {mailbox.name}: login refused") from exc
        except ssl.SSLCertVerificationError as exc:
            self.close()
            raise PermanentError(f"imap {mailbox.name}: the server's TLS certificate is not trusted") from exc
        except (OSError, IMAPClientError) as exc:
            self.close()
            raise TransientError(f"imap {mailbox.name}: {type(exc).__name__} during login") from exc
        try:
            status = client.select_folder(mailbox.folder)
        except (OSError, IMAPClientAbortError) as exc:
            self.close()
            raise TransientError(f"imap {mailbox.name}: {type(exc).__name__} selecting the folder") from exc
        except IMAPClientError as exc:  # NO: the folder does not exist or may not be read
            self.close()
            raise PermanentError(f"imap {mailbox.name}: cannot select folder {mailbox.folder!r}") from exc
        self.uidvalidity = int(status[b"UIDVALIDITY"])

    def search(self, *, include_seen: bool = False, since: date | None = None) -> list[int]:
        """UIDs of the messages to read, oldest first: unseen ones unless `include_seen`."""
        criteria = [] if include_seen else ["UNSEEN"]
        if since is not None:
            criteria += ["SINCE", since]
        return sorted(self._call("search", criteria or ["ALL"]))

    def fetch(
        self, uids: list[int], *, max_bytes: int | None = None, header_max_bytes: int = 64 * 1024
    ) -> list[FetchedMessage]:
        """The messages, in `uids` order; BODY.PEEK leaves the \\Seen flag alone.

        With `max_bytes`, sizes are asked first and a message over it comes with the first
        `header_max_bytes` of its header only (a partial fetch: the header of a large message may
        be large too). Its body is never downloaded.
        """
        sizes, large = {}, set()
        if max_bytes is not None:
            sizes = {uid: data.get(b"RFC822.SIZE") for uid, data in self._call("fetch", uids, ["RFC822.SIZE"]).items()}
            large = {uid for uid, size in sizes.items() if (size or 0) > max_bytes}
        small = [uid for uid in uids if uid not in large]
        response = self._call("fetch", small, ["BODY.PEEK[]", "INTERNALDATE"]) if small else {}
        if large:
            header = f"BODY.PEEK[HEADER]<0.{header_max_bytes}>"
            response.update(self._call("fetch", sorted(large), [header, "INTERNALDATE"]))
        messages = []
        for uid in uids:
            data = response.get(uid, {})
            raw = data.get(b"BODY[]", data.get(b"BODY[HEADER]<0>"))
            if raw is None:
                continue  # expunged meanwhile by another client
            messages.append(
                FetchedMessage(uid=uid, raw=raw, internal_date=data.get(b"INTERNALDATE"), size=sizes.get(uid),
                               header_only=uid in large)
            )  # fmt: skip
        return messages

    def mark_seen(self, uids: list[int]) -> None:
        self._call("add_flags", uids, [SEEN], silent=True)

    def close(self):
        if self._client is None:
            return
        client, self._client = self._client, None
        try:
            client.logout()
        except (OSError, IMAPClientError):
            client.shutdown()

    def _call(self, method: str, *args, **kwargs):
        try:
            return getattr(self._client, method)(*args, **kwargs)
        except (OSError, IMAPClientError) as exc:
            raise TransientError(f"imap {self.mailbox.name}: {type(exc).__name__} in {method.upper()}") from exc
