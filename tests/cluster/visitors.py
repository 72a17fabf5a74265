"""The cluster's visitors: web-form submissions, prototype progress pages and sales chats, all through nginx.

Each visitor calls from an address of its own on the bridge (the throttles, the prototype holds and the
Idempotency-Key owner are per client address, as nginx reports it). What a visitor does after a failure is
what the product's own clients do:

- a submission is sent again (same Idempotency-Key and fields, a fresh reCAPTCHA token) until it is
  answered, as the lead form does after a lost answer (static/leadgen/lead_form.js), after Retry-After
  on a 429;
- a progress page's stream is read as EventSource reads it: after a cut it reconnects with Last-Event-ID,
  until `complete` or `error` (or a 204: nothing more will come);
- a chat question is asked once: a cut answer is read back from the transcript afterwards.

Every loop is bounded in attempts and in time.
"""

import asyncio
import json
import time
from dataclasses import dataclass, field

import aiohttp

SUBMIT_ATTEMPTS, SUBMIT_SECONDS = 30, 30
STREAM_CONNECTS = 30
RECONNECT_DELAY = 1.0  # EventSource waits about this long (browsers: 1 to 3 s)
CHAT_SECONDS = 60
QUESTION = "Can you build us a prototype of our quoting tool?"


@dataclass
class Submission:
    n: int
    email: str
    prototype: bool
    answers: list = field(default_factory=list)  # each attempt's status, or the client error's name
    lead_id: str | None = None
    upstreams: list = field(default_factory=list)


@dataclass
class Connection:
    last_event_id: int | None  # what it sent as Last-Event-ID
    status: int | str = 0
    upstream: str = ""
    ids: list = field(default_factory=list)  # event ids received, in order
    ended: str = ""  # "complete", "error", "eof", "no content", or the client error's name


@dataclass
class Watch:
    lead_id: str
    connections: list = field(default_factory=list)
    outcome: str = ""  # the terminal event, or "" if none came

    @property
    def cut(self) -> list[Connection]:
        """Connections that ended before the outcome, other than refused opens."""
        return [c for c in self.connections[:-1] if c.status == 200]


@dataclass
class Conversation:
    session_id: str
    user_ip: str
    status: int | str = 0
    upstream: str = ""
    tokens: list = field(default_factory=list)
    final: tuple | None = None  # (event, data) of `done` or `error`
    cut: bool = False


async def sse(content: aiohttp.StreamReader):
    """Server-sent events as EventSource parses them: (event, id or None, data)."""
    kind, ident, data = "message", None, []
    async for raw in content:
        line = raw.decode().rstrip("\r\n")
        if not line:
            if data:
                yield kind, ident, "\n".join(data)
            kind, ident, data = "message", None, []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "event":
            kind = value
        elif name == "id":
            ident = value
        elif name == "data":
            data.append(value)


class Visitors:
    """One HTTP client per visitor address; `site` is nginx's address."""

    def __init__(self, site: str, addresses: list[str], tag: str, *, chat_key: str):
        self.site, self.addresses, self.tag, self.chat_key = site, addresses, tag, chat_key
        self.sessions: list[aiohttp.ClientSession] = []

    async def __aenter__(self):
        for address in self.addresses:
            connector = aiohttp.TCPConnector(local_addr=(address, 0), limit=0, force_close=False)
            self.sessions.append(aiohttp.ClientSession(connector=connector))
        return self

    async def __aexit__(self, *exc):
        await asyncio.gather(*(session.close() for session in self.sessions))

    def _session(self, visitor: int) -> aiohttp.ClientSession:
        return self.sessions[visitor % len(self.sessions)]

    # --- the lead form -------------------------------------------------------------------------
    def body(self, n: int, *, prototype: bool, attempt: int = 0) -> bytes:
        return json.dumps({
            "firstName": "Ada",
            "lastName": f"Lovelace {n}",
            "email": f"ada.{self.tag}.{n}@analytical.example",
            "phone": "+1 415 555 0100",
            "company": f"Acme {self.tag} {n}",
            "message": "We need help automating our quoting process this quarter.",
            "serviceType": "diagnostic" if prototype else "dedicated_team",
            "recaptchaToken": f"token-{self.tag}-{n}-{attempt}",  # one use each, as the lead form gets it
        }).encode()  # fmt: skip

    async def submit(self, n: int, *, visitor: int, prototype: bool) -> Submission:
        submission = Submission(n, f"ada.{self.tag}.{n}@analytical.example", prototype)
        key = f"{self.tag}-{n}"
        headers = {"Content-Type": "application/json", "Accept": "application/json", "Idempotency-Key": key}
        ends = time.monotonic() + SUBMIT_SECONDS
        for attempt in range(SUBMIT_ATTEMPTS):
            body = self.body(n, prototype=prototype, attempt=attempt)
            wait = 1.0
            try:
                async with self._session(visitor).post(
                    f"{self.site}/api/leads", data=body, headers=headers, timeout=aiohttp.ClientTimeout(total=30)
                ) as response:
                    submission.answers.append(response.status)
                    submission.upstreams.append(response.headers.get("X-Upstream", ""))
                    if response.status == 200:
                        submission.lead_id = (await response.json())["leadId"]
                        return submission
                    if response.status == 429:
                        wait = min(float(response.headers.get("Retry-After") or 1), 10.0)
                    elif response.status in (400, 413, 422):
                        return submission  # refused for good: reported, not retried
            except (aiohttp.ClientError, TimeoutError) as exc:
                submission.answers.append(type(exc).__name__)
            if time.monotonic() + wait > ends:
                break
            await asyncio.sleep(wait)
        return submission

    # --- the prototype's progress page -----------------------------------------------------------
    async def watch(self, lead_id: str, *, visitor: int, seconds: float) -> Watch:
        watch, last_id = Watch(lead_id), None
        url = f"{self.site}/api/leads/{lead_id}/generate-stream"
        ends = time.monotonic() + seconds
        for _ in range(STREAM_CONNECTS):
            connection = Connection(last_id)
            watch.connections.append(connection)
            headers = {"Accept": "text/event-stream", **({"Last-Event-ID": str(last_id)} if last_id else {})}
            timeout = aiohttp.ClientTimeout(total=max(1.0, ends - time.monotonic()), sock_connect=5, sock_read=60)
            try:
                async with self._session(visitor).get(url, headers=headers, timeout=timeout) as response:
                    connection.status = response.status
                    connection.upstream = response.headers.get("X-Upstream", "")
                    if response.status == 204:
                        connection.ended = "no content"
                        return watch
                    if response.status == 200:
                        async for kind, ident, _ in sse(response.content):
                            if ident is not None:
                                last_id = int(ident)
                                connection.ids.append(last_id)
                            if kind in ("complete", "error"):
                                connection.ended = watch.outcome = kind
                                return watch
                        connection.ended = "eof"
            except (aiohttp.ClientError, TimeoutError) as exc:
                connection.ended = type(exc).__name__
            if time.monotonic() + RECONNECT_DELAY > ends:
                break
            await asyncio.sleep(RECONNECT_DELAY)
        return watch

    # --- the sales chat ------------------------------------------------------------------------
    async def converse(self, n: int, *, visitor: int) -> Conversation:
        conversation = Conversation(f"cluster-{self.tag}-{n}", f"198.51.100.{n % 250 + 1}")
        headers = {"Content-Type": "application/json", "X-Chat-Api-Key": self.chat_key,
                   "X-User-IP": conversation.user_ip}  # fmt: skip
        body = json.dumps({"sessionId": conversation.session_id, "message": QUESTION}).encode()
        try:
            async with self._session(visitor).post(
                f"{self.site}/api/chat/stream", data=body, headers=headers,
                timeout=aiohttp.ClientTimeout(total=CHAT_SECONDS),
            ) as response:  # fmt: skip
                conversation.status = response.status
                conversation.upstream = response.headers.get("X-Upstream", "")
                if response.status == 200:
                    async for kind, _, data in sse(response.content):
                        if kind == "token":
                            conversation.tokens.append(json.loads(data)["content"])
                        elif kind in ("done", "error"):
                            conversation.final = (kind, json.loads(data))
                            break
        except (aiohttp.ClientError, TimeoutError):
            pass
        conversation.cut = conversation.final is None
        return conversation
