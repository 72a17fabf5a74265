"""Lead-notification emails → lead fields. Plain functions: no ORM, no network.

A notification is a web lead or an online-intro booking sent by a store's
booking system, sometimes forwarded (once or more) by store staff to
`lead-tracking+{ID}@…`. The parser reads the text parts, then the HTML ones
(when there is no text, only a "view this in a browser" stub, or no lead in
it), decoded from quoted-printable or base64 and their charset, and takes the
lead's fields from "Label: value" lines or table rows.

It never raises on bad input: a message it cannot read comes back with
`parse_error` set, so the caller can keep it as a failed lead for staff.

The message is read with the stdlib's compat32 policy rather than
policy.default: the parser needs only a few headers and the text parts, and
policy.default's structured header objects made parsing three times as slow,
on a path that runs for every email.

Every input is bounded before any pattern sees it, so no email can hold a
worker: the header (a message whose header runs past HEADER_MAX_LINES lines
is a failed lead, its fields read from the lines within), the MIME structure
and the lines (a message is cut where it would pass MIME_MAX_MARKERS boundary
lines, MIME_MAX_MULTIPARTS multipart declarations or MESSAGE_MAX_LINES lines,
since the stdlib parser's cost grows with each, and with header lines most:
every header lookup reads them all), each header value, each text part, HTML
tags, each line and each labelled value. The
patterns themselves are linear (no pattern can restart inside a run it
already scanned). bench/imap measures the slowest of a set of hostile
messages.
"""

import hashlib
import re
from dataclasses import asdict, dataclass, fields, replace
from datetime import UTC, date, datetime, time
from email import message_from_bytes
from email.header import decode_header, make_header
from email.message import Message
from email.parser import BytesHeaderParser
from email.utils import getaddresses, parsedate_to_datetime
from html.parser import HTMLParser

import phonenumbers

# Notification bodies are a few kilobytes; these only bound a pathological message.
RAW_BODY_MAX_CHARS = 200_000
MIME_MAX_MARKERS = 200  # lines starting with "--": boundaries (one per part), signatures, forward markers
MIME_MAX_MULTIPARTS = 50  # mentions of "boundary": multipart declarations, nested or not
HEADER_MAX_CHARS = 2_000
# Relays add a few lines each and mail loops stop at about a hundred hops: no real header nears this. Our own
# server's Authentication-Results and the sender's From, To, Subject and Date are within it.
HEADER_MAX_LINES = 2_000
HEADER_MAX_BYTES = 64 * 1024  # of a header read on its own (sender authentication, a message too large to fetch)
MESSAGE_MAX_LINES = 20_000
TEXT_MAX_CHARS = 100_000  # of one text part, before any pattern
HTML_TAG_MAX_CHARS = 2_000
LINE_MAX_CHARS = 1_000
VALUE_MAX_CHARS = 300
EMAIL_MAX_CHARS = 254  # RFC 5321's limit on a whole address

KNOWN_LEAD_TYPES = ("Web Lead", "Online Intro", "Intro Class", "Free Trial", "Referral")
_LEAD_TYPE_PATTERNS = [
    (re.compile(r"\b" + r"[\s-]*".join(map(re.escape, kind.split())) + r"\b", re.I), kind)
    for kind in KNOWN_LEAD_TYPES
]

# Normalized label → field. Labels are lower-cased, spaces collapsed, trailing ':' '#' '*' dropped.
LABELS = {
    "name": "name", "full name": "name", "lead name": "name", "customer name": "name",
    "contact name": "name", "prospect name": "name", "client name": "name",
    "first name": "first_name", "firstname": "first_name", "first": "first_name", "given name": "first_name",
    "last name": "last_name", "lastname": "last_name", "last": "last_name", "surname": "last_name",
    "family name": "last_name",
    "phone": "phone", "phone number": "phone", "mobile": "phone", "mobile phone": "phone",
    "mobile number": "phone", "cell": "phone", "cell phone": "phone", "telephone": "phone", "tel": "phone",
    "contact number": "phone", "phone no": "phone",
    "email": "email", "e-mail": "email", "email address": "email", "e-mail address": "email",
    "lead type": "lead_type", "type of lead": "lead_type", "request type": "lead_type",
    "booked date": "booked_date", "booking date": "booked_date", "appointment date": "booked_date",
    "class date": "booked_date", "intro date": "booked_date", "date booked": "booked_date", "date": "booked_date",
    "booked time": "booked_time", "booking time": "booked_time", "appointment time": "booked_time",
    "class time": "booked_time", "intro time": "booked_time", "time": "booked_time",
    "appointment": "booked_at", "booked": "booked_at", "booked for": "booked_at", "booking": "booked_at",
    "scheduled": "booked_at", "scheduled for": "booked_at", "class": "booked_at", "intro": "booked_at",
    "date/time": "booked_at", "date & time": "booked_at", "date and time": "booked_at",
    "appointment date/time": "booked_at", "booked date/time": "booked_at",
}  # fmt: skip

# A line the stdlib parser reads as part of a header: a field, a continuation, or an mbox "From " line.
_HEADER_LINE = re.compile(rb"From |[\x21-\x39\x3b-\x7e]*:|[\t ]")
_LINE_END = re.compile(rb"\r\n|\r|\n")  # as the stdlib parser splits lines
_LABEL_LINE = re.compile(r"^(?P<label>[^:\t]{1,40}?)\s*(?::|\t)[\s:]*(?P<value>.*)$")
_FORWARD_MARKER = re.compile(
    r"^\s*(?:-{2,}\s*Forwarded message\s*-{2,}|-{2,}\s*Original Message\s*-{2,}|Begin forwarded message:"
    r"|_{10,})\s*$",
    re.I | re.M,
)
_FORWARD_HEADER = re.compile(r"^(?P<name>From|Sent|Date|To|Cc|Subject|Reply-To)\s*:\s*(?P<value>.*)$", re.I)
_SUBJECT_PREFIX = re.compile(r"^\s*(?:(?:re|fwd?|fw|aw|wg|tr)\s*(?:\[\d+\])?\s*:\s*)+", re.I)
_TRACKING_ADDRESS = re.compile(r"^lead-tracking\+(?P<id>[A-Za-z0-9._-]{1,64})@", re.I)
# Linear: a match may not start inside a run of address characters, so a long run is scanned once,
# not once per position; the parts are bounded as RFC 5321 bounds them.
_EMAIL_ADDRESS = re.compile(r"(?<![A-Za-z0-9._%+'-])[A-Za-z0-9._%+'-]{1,64}@[A-Za-z0-9.-]{1,252}\.[A-Za-z]{2,63}\b")
# A "<" that does not open a tag closed within HTML_TAG_MAX_CHARS is text: HTMLParser rescans the rest of the
# document for every unclosed "<", which made 40 KB of "<a" take seconds.
_HTML_OPEN_LT = re.compile(rf"<(?![A-Za-z/!?][^<>]{{0,{HTML_TAG_MAX_CHARS}}}>)")
_AUTH_RESULTS_COMMENT = re.compile(r"\([^()]{0,500}\)")  # RFC 8601 comments, e.g. "(p=reject dis=none)"
_TIME = re.compile(
    r"\b(?P<hour>[01]?\d|2[0-3])(?::(?P<minute>[0-5]\d))?\s*(?P<meridiem>[ap])\.?\s*m\b\.?"
    r"|\b(?P<hour24>[01]?\d|2[0-3]):(?P<minute24>[0-5]\d)\b",
    re.I,
)
_WEEKDAY = re.compile(r"\b(?:mon|tue|tues|wed|thu|thur|thurs|fri|sat|sun)(?:day|nesday|rsday|urday)?\b\.?", re.I)
_ORDINAL = re.compile(r"\b(\d{1,2})(?:st|nd|rd|th)\b", re.I)
_DATE_FORMATS = ("%m/%d/%Y", "%m/%d/%y", "%Y-%m-%d", "%m-%d-%Y", "%B %d %Y", "%b %d %Y", "%d %B %Y", "%d %b %Y")
_RECIPIENT_HEADERS = ("To", "Cc", "Delivered-To", "X-Original-To", "Envelope-To", "X-Forwarded-To")
# A text part this short with a link in it is a "view this email in your browser" stub.
_STUB_MAX_CHARS = 300


@dataclass(frozen=True)
class ParsedLeadEmail:
    """What one email says about a lead. Empty strings and None mean "not in the email"."""

    lead_type: str = ""
    first_name: str = ""
    last_name: str = ""
    email: str = ""  # the prospect's own address, when the notification gives it
    phone: str = ""  # E.164
    booked_date: date | None = None
    booked_time: time | None = None
    subject: str = ""
    email_from: str = ""  # the sender's address: the store's lead address
    email_recipient: str = ""
    tracking_id: str = ""
    is_forwarded: bool = False
    forwarded_original_from: str = ""
    forwarded_original_to: str = ""
    forwarded_original_date: str = ""
    raw_body: str = ""
    received_at: datetime | None = None
    parse_error: str = ""

    @property
    def dedup_key(self) -> str | None:
        if self.received_at is None:
            return None
        return lead_dedup_key(email=self.email_from, phone=self.phone, received_at=self.received_at)

    def to_json(self) -> dict:
        """JSON-safe fields (dates as ISO 8601); `from_json` reads them back."""
        return {
            name: value.isoformat() if isinstance(value, date | time | datetime) else value
            for name, value in asdict(self).items()
        }

    @classmethod
    def from_json(cls, data: dict) -> "ParsedLeadEmail":
        readers = {"booked_date": date.fromisoformat, "booked_time": time.fromisoformat,
                   "received_at": datetime.fromisoformat}  # fmt: skip
        values = {}
        for field in fields(cls):
            value = data.get(field.name, field.default)
            if value and field.name in readers:
                value = readers[field.name](value)
            values[field.name] = value
        return cls(**values)


def lead_dedup_key(*, email: str, phone: str, received_at: datetime) -> str:
    """`{email}#{phone}#{date}`, or `{email}#{receivedAt}` without a phone (times in UTC).

    With a phone, the same person notified twice by the same store on the same
    day is one lead; without one, only the same message is. A sender address
    longer than any valid one (254) is replaced by its SHA-256, so the key
    always fits its column whatever the From header says.
    """
    email = email.strip().lower()
    if len(email) > EMAIL_MAX_CHARS:
        email = "sha256:" + hashlib.sha256(email.encode()).hexdigest()
    received_at = received_at.astimezone(UTC)
    if phone:
        return f"{email}#{phone}#{received_at.date().isoformat()}"
    return f"{email}#{received_at.replace(microsecond=0).isoformat().replace('+00:00', 'Z')}"


def normalize_phone(text: str, default_region: str = "US") -> str:
    """The first valid phone number in `text` as E.164, or "" when there is none.

    Numbers without a country code are read in `default_region`; extensions are
    dropped (E.164 has none); letters never become digits.
    """
    if not text:
        return ""
    for match in phonenumbers.PhoneNumberMatcher(text, default_region):
        return phonenumbers.format_number(match.number, phonenumbers.PhoneNumberFormat.E164)
    return ""


def tracking_id_from_address(address: str) -> str:
    match = _TRACKING_ADDRESS.match(address.strip())
    return match.group("id") if match else ""


def html_to_text(html: str) -> str:
    reader = _HtmlText()
    reader.feed(_HTML_OPEN_LT.sub("&lt;", html[:TEXT_MAX_CHARS]))
    reader.close()
    lines = (
        re.sub(r"[ \f\v\r\xa0]+", " ", line[:LINE_MAX_CHARS]).strip(" \t")
        for line in "".join(reader.parts)[:TEXT_MAX_CHARS].split("\n")
    )
    return "\n".join(line for line in lines if line)


def parse_lead_email(raw: bytes, *, default_region: str = "US", received_at: datetime | None = None) -> ParsedLeadEmail:
    """Read one RFC 5322 message. `received_at` (the IMAP INTERNALDATE) wins over the Date header."""
    header_end, header_over = _header_end(raw)
    if header_over:
        reason = f"header too long: over {HEADER_MAX_LINES:,} lines; its body was not read"
        return headers_only(raw[:header_end], received_at=received_at, reason=reason)
    try:
        message = message_from_bytes(_mime_bounded(raw))
        headers = _headers(message)
    except Exception as exc:  # a message the email package cannot even split
        return ParsedLeadEmail(
            raw_body=raw[:RAW_BODY_MAX_CHARS].decode("utf-8", "replace"),
            received_at=_utc(received_at),
            parse_error=f"unreadable message: {type(exc).__name__}",
        )
    headers["received_at"] = _utc(received_at) or headers["received_at"]
    bodies = _text_bodies(message)
    if not bodies:
        return ParsedLeadEmail(
            **headers,
            raw_body=raw[:RAW_BODY_MAX_CHARS].decode("utf-8", "replace"),
            parse_error="no text/plain or text/html part",
        )
    failed = None
    for source, text in bodies:
        parsed = _parse_body(text, subject=headers["subject"], default_region=default_region)
        parsed = replace(parsed, raw_body=source[:RAW_BODY_MAX_CHARS], **headers)
        if not parsed.parse_error:
            return parsed
        failed = failed or parsed
    return failed


def headers_only(raw_header: bytes, *, received_at: datetime | None, reason: str) -> ParsedLeadEmail:
    """A failed lead from a message's header alone: for a message too large to fetch, or one that never
    finished parsing. Its body is not read."""
    try:
        headers = _headers(BytesHeaderParser().parsebytes(_header_bounded(raw_header)))
    except Exception:  # headers the email package cannot split: the reason is still kept
        headers = {"received_at": None}
    headers["received_at"] = _utc(received_at) or headers["received_at"]
    return ParsedLeadEmail(**headers, parse_error=reason)


@dataclass(frozen=True)
class SenderAuthentication:
    """What our own receiving server found about a message's sender (RFC 8601 Authentication-Results).

    Only headers with our server's authserv-id count: any other was written by
    the sender or a hop on the way, and proves nothing.
    """

    authserv_id: str
    results: tuple[tuple[str, str, str], ...]  # (method, result, domain) for dmarc and spf

    def passes_for(self, domain: str) -> bool:
        """A DMARC or SPF pass for a domain aligned (relaxed: the same or a parent/child) with `domain`."""
        domain = domain.lower().strip(".")
        return bool(domain) and any(
            result == "pass" and (found == domain or found.endswith("." + domain) or domain.endswith("." + found))
            for _, result, found in self.results
            if found
        )

    def describe(self) -> str:
        if not self.results:
            return f"no DMARC or SPF result from {self.authserv_id}"
        return ", ".join(f"{method}={result} ({domain or 'no domain'})" for method, result, domain in self.results)


def sender_authentication(raw: bytes, *, authserv_id: str) -> SenderAuthentication:
    """The DMARC and SPF results `authserv_id` recorded in the message's header (within its bounds)."""
    results = []
    try:
        header = BytesHeaderParser().parsebytes(_header_bounded(raw))
        values = (header.get_all("Authentication-Results") or [])[:20]
    except Exception:  # a header the email package cannot split carries no result
        values = []
    for value in values:
        text = _AUTH_RESULTS_COMMENT.sub(" ", str(value)[:HEADER_MAX_CHARS])
        server, *resinfos = (part.strip() for part in text.split(";"))
        if (server.split() or [""])[0].lower() != authserv_id.lower():
            continue
        for resinfo in resinfos:
            tokens = resinfo.split()
            method, _, result = (tokens[0] if tokens else "").partition("=")
            properties = dict(token.split("=", 1) for token in tokens[1:] if "=" in token)
            if method.lower() == "dmarc":
                domain = properties.get("header.from", "")
            elif method.lower() == "spf":
                domain = properties.get("smtp.mailfrom", "").rpartition("@")[2]
            else:
                continue
            results.append((method.lower(), result.lower(), domain.strip('"').lower()))
    return SenderAuthentication(authserv_id=authserv_id, results=tuple(results))


# --- internals -----------------------------------------------------------------------------


def _header_end(raw: bytes) -> tuple[int, bool]:
    """Where the header ends within its first HEADER_MAX_LINES lines, and whether it goes on past them."""
    position = 0
    for _ in range(HEADER_MAX_LINES):
        if not _HEADER_LINE.match(raw, position):
            return position, False
        end = _LINE_END.search(raw, position)
        if end is None:
            return len(raw), False
        position = end.end()
    return position, bool(_HEADER_LINE.match(raw, position))


def _header_bounded(raw: bytes) -> bytes:
    """The header alone, within HEADER_MAX_LINES lines and HEADER_MAX_BYTES."""
    raw = raw[:HEADER_MAX_BYTES]
    return raw[: _header_end(raw)[0]]


def _mime_bounded(raw: bytes) -> bytes:
    """The message cut where it would pass MIME_MAX_MARKERS, MIME_MAX_MULTIPARTS or MESSAGE_MAX_LINES
    (module docstring).

    Counted with bytes.count/find rather than one pattern: a case-insensitive scan of a few megabytes
    cost more than parsing them.
    """
    lowered = raw.lower()
    bounds = ((raw, b"\n--", MIME_MAX_MARKERS), (lowered, b"boundary", MIME_MAX_MULTIPARTS),
              (raw, b"\n", MESSAGE_MAX_LINES), (raw, b"\r", MESSAGE_MAX_LINES))  # fmt: skip
    cut = len(raw)
    for text, needle, limit in bounds:
        if text.count(needle) <= limit:
            continue
        position = -1
        for _ in range(limit + 1):
            position = text.find(needle, position + 1)
        cut = min(cut, position)
    return raw[:cut]


def _utc(moment: datetime | None) -> datetime | None:
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).replace(microsecond=0)


def _header_text(value) -> str:
    """A header as text, RFC 2047 encoded words decoded."""
    if value is None:
        return ""
    value = str(value)[:HEADER_MAX_CHARS]
    try:
        return str(make_header(decode_header(value)))
    except (LookupError, UnicodeError, ValueError):
        return value


def _addresses(message: Message, name: str) -> list[str]:
    values = (message.get_all(name) or [])[:10]
    return [
        address.strip() for _, address in getaddresses([str(v)[:HEADER_MAX_CHARS] for v in values]) if "@" in address
    ]


def _headers(message: Message) -> dict:
    senders = _addresses(message, "From")
    recipients = [address for name in _RECIPIENT_HEADERS for address in _addresses(message, name)]
    tracking = next(((tracking_id_from_address(a), a) for a in recipients if tracking_id_from_address(a)), None)
    try:
        sent_at = parsedate_to_datetime(str(message["Date"])[:200]) if message["Date"] else None
    except (TypeError, ValueError, IndexError):
        sent_at = None
    return {
        "subject": " ".join(_header_text(message["Subject"]).split()),
        "email_from": senders[0] if senders else "",
        "email_recipient": tracking[1] if tracking else (recipients[0] if recipients else ""),
        "tracking_id": tracking[0] if tracking else "",
        "received_at": _utc(sent_at),
    }


def _decoded(part: Message) -> str:
    """The part's text: transfer encoding (quoted-printable, base64) undone, then its charset."""
    payload = (part.get_payload(decode=True) or b"")[: 4 * TEXT_MAX_CHARS]
    try:
        text = payload.decode(part.get_content_charset() or "utf-8", "replace")
    except LookupError:  # an unknown charset: the bytes are still mostly ASCII labels and digits
        text = payload.decode("utf-8", "replace")
    return text[:TEXT_MAX_CHARS]


def _text_bodies(message: Message) -> list[tuple[str, str]]:
    """(as sent, as text) of each text part worth reading: text/plain ones first, then HTML ones.

    Attachments are skipped unless nothing else is text (some senders mark the
    body as an attachment), and so is a short text part with a link in it next
    to an HTML one: a "view this email in your browser" stub.
    """
    parts = [part for part in message.walk() if part.get_content_maintype() == "text"]
    inline = [part for part in parts if part.get_content_disposition() != "attachment"] or parts
    plain = [_decoded(part) for part in inline if part.get_content_subtype() == "plain"]
    html = [_decoded(part) for part in inline if part.get_content_subtype() == "html"]
    bodies = [
        (text, text)
        for text in plain
        if text.strip() and not (html and len(text.strip()) < _STUB_MAX_CHARS and "http" in text)
    ]
    return bodies + [(source, html_to_text(source)) for source in html if source.strip()]


def _clean_line(line: str) -> str:
    line = re.sub(r"^(?:\s*>)+", "", line[:LINE_MAX_CHARS])  # quoting of replies and some forwards
    return line.replace("*", "").strip()


def _split_forwards(text: str) -> tuple[str, dict]:
    """The innermost original message and its forwarded headers (empty when not a forward)."""
    lines = [_clean_line(line) for line in text.splitlines()]
    markers = [i for i, line in enumerate(lines) if _FORWARD_MARKER.match(line)]
    if not markers:
        return "\n".join(lines), {}
    start = markers[-1] + 1
    original, index, seen_header = {}, start, False
    while index < len(lines):
        line = lines[index]
        if not line:
            if seen_header:
                break
            index += 1
            continue
        header = _FORWARD_HEADER.match(line)
        if not header:
            break
        seen_header = True
        name = header.group("name").lower()
        name = "date" if name == "sent" else name
        original.setdefault(name, header.group("value").strip())
        index += 1
    return "\n".join(lines[index:]), original


def _labelled_values(text: str) -> dict[str, str]:
    """field → first value found, from 'Label: value' lines, table rows, or a label alone above its value."""
    found: dict[str, str] = {}
    lines = [line[:LINE_MAX_CHARS].strip() for line in text.splitlines() if line.strip()]
    for index, line in enumerate(lines):
        match = _LABEL_LINE.match(line)
        label = match.group("label") if match else line
        field = LABELS.get(_normalize_label(label))
        if field is None or field in found:
            continue
        value = match.group("value").strip(" \t:") if match else ""
        if not value and index + 1 < len(lines) and not _is_labelled(lines[index + 1]):
            value = lines[index + 1]
        if value:
            found[field] = value[:VALUE_MAX_CHARS]
    return found


def _normalize_label(label: str) -> str:
    return " ".join(label.lower().replace("_", " ").split()).rstrip(":#*. ").strip()


def _is_labelled(line: str) -> bool:
    match = _LABEL_LINE.match(line)
    return bool(match) and _normalize_label(match.group("label")) in LABELS


def _split_name(full: str) -> tuple[str, str]:
    full = " ".join(full.split())
    if "," in full:
        last, _, first = full.partition(",")
        return first.strip(), last.strip()
    first, _, last = full.partition(" ")
    return first, last


def _lead_type(labelled: str, subject: str, body: str) -> str:
    for text in (labelled, subject, body):
        for pattern, kind in _LEAD_TYPE_PATTERNS:
            if pattern.search(text):
                return kind
    return labelled


def _name_from_subject(subject: str) -> str:
    """'New Web Lead: Jane Doe' / 'Online Intro booked - Jane Doe' / '… from Jane Doe'."""
    for pattern, _ in _LEAD_TYPE_PATTERNS:
        match = pattern.search(subject)
        if match:
            tail = re.search(r"(?:\bfrom\b|[:\-–|])\s*(?P<name>[^\d@<>:|]{2,80}?)\s*$", subject[match.end():], re.I)
            return tail.group("name") if tail else ""
    return ""


def _parse_time(value: str) -> time | None:
    match = _TIME.search(value)
    if not match:
        return None
    if match.group("hour24") is not None:
        return time(int(match.group("hour24")), int(match.group("minute24")))
    hour = int(match.group("hour"))
    if not 1 <= hour <= 12:
        return None
    hour = hour % 12 + (12 if match.group("meridiem").lower() == "p" else 0)
    return time(hour, int(match.group("minute") or 0))


def _parse_date(value: str) -> date | None:
    if not value.strip():
        return None  # most notifications have no booking: no need to try every format on nothing
    value = _TIME.sub(" ", value)
    value = _WEEKDAY.sub(" ", value)
    value = _ORDINAL.sub(r"\1", value)
    value = re.sub(r"\b(?:at|@|on)\b|[,@]", " ", value, flags=re.I)
    value = re.sub(r"\bsept\b", "sep", value, flags=re.I)
    value = re.sub(r"T\d{2}:\d{2}.*$", "", " ".join(value.split()))
    candidates = [value] + re.findall(r"\d{1,4}[/-]\d{1,2}[/-]\d{2,4}", value)
    for candidate in candidates:
        for fmt in _DATE_FORMATS:
            try:
                return datetime.strptime(candidate.strip(), fmt).date()
            except ValueError:
                continue
    return None


def _parse_body(text: str, *, subject: str, default_region: str) -> ParsedLeadEmail:
    original_text, original = _split_forwards(text)
    original_subject = _SUBJECT_PREFIX.sub("", (original.get("subject") or subject)[:HEADER_MAX_CHARS])
    values = _labelled_values(original_text)

    first, last = values.get("first_name", ""), values.get("last_name", "")
    if not (first or last):
        first, last = _split_name(values.get("name") or _name_from_subject(original_subject))
    email_match = _EMAIL_ADDRESS.search(values.get("email", ""))
    booked_at = values.get("booked_at", "")
    booked_date = _parse_date(values.get("booked_date") or booked_at)
    booked_time = _parse_time(values.get("booked_time") or booked_at or values.get("booked_date", ""))

    lead = ParsedLeadEmail(
        lead_type=_lead_type(values.get("lead_type", ""), original_subject, original_text),
        first_name=first,
        last_name=last,
        email=email_match.group(0).lower() if email_match else "",
        phone=normalize_phone(values.get("phone", ""), default_region),
        booked_date=booked_date,
        booked_time=booked_time,
        is_forwarded=bool(original) or bool(re.match(r"^\s*(?:fwd?|fw)\s*:", subject, re.I)),
        forwarded_original_from=_first_address(original.get("from", "")),
        forwarded_original_to=_first_address(original.get("to", "")),
        forwarded_original_date=original.get("date", ""),
    )
    if not (lead.phone or lead.first_name or lead.last_name or lead.email):
        reason = "no lead details found: no name, phone or email in the body"
        if "phone" in values:
            reason = "no lead details found: the phone is not a valid number, and there is no name or email"
        return replace(lead, parse_error=reason)
    return lead


def _first_address(value: str) -> str:
    value = value[:VALUE_MAX_CHARS]
    addresses = [address for _, address in getaddresses([value]) if "@" in address]
    if addresses:
        return addresses[0]
    match = _EMAIL_ADDRESS.search(value)  # an address among words getaddresses cannot split
    return match.group(0) if match else ""


class _HtmlText(HTMLParser):
    """Visible text of an HTML email: block elements and rows become lines, table cells tab-separated."""

    _BLOCKS = {"p", "div", "br", "tr", "li", "ul", "ol", "table", "h1", "h2", "h3", "h4", "h5", "h6", "section",
               "article", "header", "footer", "hr", "dt", "dd", "blockquote", "center", "title"}  # fmt: skip
    _HIDDEN = {"script", "style", "head"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._hidden = 0

    def handle_starttag(self, tag, attrs):
        if tag in self._HIDDEN:
            self._hidden += 1
        elif tag in self._BLOCKS:
            self.parts.append("\n")
        elif tag in ("td", "th"):
            self.parts.append("\t")

    def handle_endtag(self, tag):
        if tag in self._HIDDEN:
            self._hidden = max(self._hidden - 1, 0)
        elif tag in self._BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data):
        if not self._hidden:
            self.parts.append(data.replace("\n", " "))
