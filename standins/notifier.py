"""Lead-notification emails as stores' booking systems send them, and a notifier that sends one every few minutes.

Each notification announces one made-up person (name, phone, email, what they asked about, a booking for the
lead types that have one) in one of the shapes tracking/parsing.py reads: labelled text lines, an HTML-only
table, a "view this email in your browser" text part next to the HTML one, a booking forwarded by store staff,
and a referral in quoted-printable. They go to `lead-tracking+{tracking id}@…`, from the store's lead email, so
the poller files them under that store (by default the demo store of `manage.py load_demo`).

    notifier = Notifier(send, interval=180)   # send(notification) puts it in a mailbox
    notifier.start() ... notifier.stop()
    notifier.next()                           # the next notification, without sending it
"""

import html
import random
import threading
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from email.message import EmailMessage
from email.utils import format_datetime, formataddr, make_msgid

# The store `manage.py load_demo` creates: its tracking id and lead email.
DEMO_TRACKING_ID = "DEMO1"
DEMO_STORE_EMAIL = "leads-demo@example.com"
DEMO_STUDIO = "Demo Fitness Downtown"
TRACKING_DOMAIN = "leads.example.org"
STAFF_EMAIL = "manager@demo-fitness.example.com"
INTERVAL = 180.0
FIRST_AFTER = 5.0  # the first one comes soon after start, not a whole interval later

FIRST_NAMES = ("Jane", "Sam", "José", "Renée", "Aisha", "Wei", "Priya", "Liam", "Olivia", "Mateo", "Fatima", "Noah",
               "Chloé", "Kwame", "Ingrid", "Hiroshi", "Zoë", "Diego", "Amara", "Sean")  # fmt: skip
LAST_NAMES = ("Doe", "Lee", "Núñez", "Lefèvre", "Okafor", "Zhang", "Patel", "O'Neil", "García", "Kowalski",
              "Haddad", "Müller", "Johansson", "Nakamura", "Mensah", "Brown", "Rossi", "Dubois")  # fmt: skip
SERVICES = ("membership options and pricing", "personal training", "group classes for beginners",
            "a family membership", "a corporate wellness plan for my team", "getting back in shape after an injury",
            "the student discount", "morning classes before work")  # fmt: skip
# North American numbers in 555-0100…0199, the range set aside for fiction: valid to a phone parser, never anyone's.
AREA_CODES = ("415", "212", "312", "617", "206", "512", "305", "646", "503", "773", "718", "702", "919")


@dataclass(frozen=True)
class Person:
    first_name: str
    last_name: str
    email: str
    phone: str  # E.164
    service: str

    def phone_as(self, style: int) -> str:
        """The number the ways booking systems print it."""
        area, exchange, line = self.phone[2:5], self.phone[5:8], self.phone[8:]
        return (f"({area}) {exchange}-{line}", f"{area}.{exchange}.{line}", f"+1 {area} {exchange} {line}",
                f"{area}-{exchange}-{line}")[style % 4]  # fmt: skip


@dataclass(frozen=True)
class Notification:
    kind: str  # which of FORMATS
    message: EmailMessage
    lead: dict[str, str]  # what the parser should read from it: fields of ParsedLeadEmail, dates in ISO 8601


def _ascii(text: str) -> str:
    return unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode().replace("'", "").lower()


def _booking(rng: random.Random, now: datetime) -> datetime:
    day = (now + timedelta(days=rng.randint(1, 4))).date()
    return datetime.combine(day, time(rng.randint(6, 19), rng.choice((0, 15, 30, 45))))


def _day_name(when: date) -> str:
    """'Monday, March 16th, 2026'."""
    suffix = "th" if 11 <= when.day <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(when.day % 10, "th")
    return f"{when:%A}, {when:%B} {when.day}{suffix}, {when.year}"


def _clock(when: datetime) -> str:
    """'6:30 PM'."""
    return f"{when.hour % 12 or 12}:{when:%M} {'AM' if when.hour < 12 else 'PM'}"


def _message(*, sender: str, to: str, subject: str, now: datetime) -> EmailMessage:
    message = EmailMessage()
    message["From"] = sender
    message["To"] = to
    message["Subject"] = subject
    message["Date"] = format_datetime(now)
    message["Message-ID"] = make_msgid(domain=sender.rpartition("@")[2].rstrip(">"))
    return message


def _lead(person: Person, lead_type: str, booked: datetime | None = None, *, with_email: bool = True) -> dict:
    return {"lead_type": lead_type, "first_name": person.first_name, "last_name": person.last_name,
            "email": person.email if with_email else "", "phone": person.phone,
            "booked_date": booked.date().isoformat() if booked else "",
            "booked_time": booked.time().isoformat() if booked else ""}  # fmt: skip


# --- the formats: (notifier, person, rng, now) → Notification ----------------------------------


def web_lead_text(notifier: "Notifier", person: Person, rng: random.Random, now: datetime) -> Notification:
    """The website's lead form: plain text, one "Label: value" line per field."""
    message = _message(sender=formataddr((notifier.studio, notifier.store_email)), to=notifier.recipient,
                       subject=f"New Web Lead: {person.first_name} {person.last_name}", now=now)  # fmt: skip
    message.set_content(
        "You have a new web lead!\n\n"
        "Lead Type: Web Lead\n"
        f"First Name: {person.first_name}\n"
        f"Last Name: {person.last_name}\n"
        f"Email: {person.email}\n"
        f"Phone: {person.phone_as(rng.randrange(4))}\n"
        f"Preferred Studio: {notifier.studio}\n"
        f"Interested In: {person.service}\n\n"
        "Call within 5 minutes: leads contacted in the first 5 minutes convert best.\n"
    )
    return Notification("web lead, text", message, _lead(person, "Web Lead"))


def online_intro_html(notifier: "Notifier", person: Person, rng: random.Random, now: datetime) -> Notification:
    """The booking system's intro booking: HTML only, quoted-printable, the name as "Last, First"."""
    booked = _booking(rng, now)
    message = _message(sender=formataddr(("Booking System", notifier.store_email)), to=notifier.recipient,
                       subject=f"New Online Intro - {person.first_name} {person.last_name}", now=now)  # fmt: skip
    rows = (("Name", f"{person.last_name}, {person.first_name}"), ("Phone", person.phone_as(rng.randrange(4))),
            ("Email", person.email), ("Class Date", _day_name(booked.date())),
            ("Class Time", _clock(booked)))  # fmt: skip
    cells = "\n".join(f'<tr><th align="left">{label}</th><td>{html.escape(value)}</td></tr>' for label, value in rows)
    message.set_content(
        "<!DOCTYPE html>\n<html><head><title>New Online Intro</title><style>td { padding: 4px }</style></head>\n"
        f"<body>\n<h2>New Online Intro booked</h2>\n<p>A new intro class was booked online at "
        f"<b>{html.escape(notifier.studio)}</b>. They asked about {html.escape(person.service)}.</p>\n"
        f'<table style="border-collapse: collapse; font-family: Helvetica, Arial, sans-serif">\n{cells}\n</table>\n'
        '<p style="color:#999">Sent by the booking system &mdash; do not reply.</p>\n</body></html>\n',
        subtype="html",
        cte="quoted-printable",
    )
    return Notification("online intro, HTML only", message, _lead(person, "Online Intro", booked))


def free_trial_with_browser_stub(
    notifier: "Notifier", person: Person, rng: random.Random, now: datetime
) -> Notification:
    """A marketing platform's alert: a text part that only links to the web version, the lead in the HTML part."""
    booked = _booking(rng, now)
    message = _message(sender=formataddr((f"{notifier.studio} via Promotions", notifier.store_email)),
                       to=notifier.recipient, subject=f"Free Trial request from {person.first_name}",
                       now=now)  # fmt: skip
    message.set_content(
        "New Free Trial request. View this email in your browser: https://promotions.example.com/view/"
        f"{rng.getrandbits(48):012x}\n"
    )
    rows = (("Lead Type", "Free Trial"), ("First Name", person.first_name), ("Last Name", person.last_name),
            ("Mobile", person.phone_as(rng.randrange(4))), ("Email Address", person.email),
            ("Appointment", f"{booked:%a, %b} {booked.day}, {booked.year} at {_clock(booked)}"),
            ("Goal", person.service))  # fmt: skip
    cells = "".join(f"<tr><td><b>{label}</b></td><td>{html.escape(value)}</td></tr>" for label, value in rows)
    message.add_alternative(
        f"<html><body><p>Someone claimed a free trial class!</p><table>{cells}</table>"
        '<p><a href="https://promotions.example.com/unsubscribe">Unsubscribe</a></p></body></html>',
        subtype="html",
        cte="base64",
    )
    return Notification("free trial, text stub and HTML", message, _lead(person, "Free Trial", booked))


def intro_class_forwarded(notifier: "Notifier", person: Person, rng: random.Random, now: datetime) -> Notification:
    """A booking the studio's inbox got, forwarded to the tracking address by the manager from Gmail."""
    booked = _booking(rng, now)
    sent = now - timedelta(minutes=rng.randint(3, 40))
    message = _message(sender=formataddr(("Studio Manager", STAFF_EMAIL)), to=notifier.recipient,
                       subject="Fwd: New Intro Class", now=now)  # fmt: skip
    message.set_content(
        "Another one for the tracker.\n\n"
        "---------- Forwarded message ---------\n"
        f"From: Booking System <{notifier.store_email}>\n"
        f"Date: {sent:%a, %b} {sent.day}, {sent.year} at {_clock(sent)}\n"
        "Subject: New Intro Class\n"
        f"To: <frontdesk@{STAFF_EMAIL.rpartition('@')[2]}>\n\n\n"
        "Lead Type: Intro Class\n"
        f"Name: {person.first_name} {person.last_name}\n"
        f"Mobile: {person.phone_as(rng.randrange(4))}\n"
        f"Appointment: {booked:%m/%d/%Y} at {booked.hour % 12 or 12}:{booked:%M}{'am' if booked.hour < 12 else 'pm'}\n"
    )
    return Notification("intro class, forwarded", message, _lead(person, "Intro Class", booked, with_email=False))


def referral_quoted_printable(notifier: "Notifier", person: Person, rng: random.Random, now: datetime) -> Notification:
    """A member's referral from the member portal: plain text in quoted-printable, a long comment line."""
    member = f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}"
    message = _message(sender=notifier.store_email, to=notifier.recipient,
                       subject=f"New referral from {member}", now=now)  # fmt: skip
    message.set_content(
        "Lead Type: Referral\n"
        f"Name: {person.first_name} {person.last_name}\n"
        f"Phone Number: {person.phone_as(rng.randrange(4))}\n"
        f"E-mail: {person.email}\n"
        f"Referred By: {member}\n"
        f"Comments: My friend {member.split()[0]} told me about the studio. I would like to know more about "
        f"{person.service}, and which times are least busy in the evenings.\n",
        cte="quoted-printable",
    )
    return Notification("referral, quoted-printable", message, _lead(person, "Referral"))


FORMATS = (web_lead_text, online_intro_html, free_trial_with_browser_stub, intro_class_forwarded,
           referral_quoted_printable)  # fmt: skip


class Notifier:
    """Sends the next notification every `interval` seconds (the first after FIRST_AFTER, or the interval when
    shorter), in a thread of its own, taking turns through FORMATS.

    `number` is how many were sent before (e.g. the messages already in a kept mailbox): the n-th
    notification's phone is unique among the first 1,300, so each is its own lead.
    """

    def __init__(
        self,
        send: Callable[[Notification], None],
        *,
        interval: float = INTERVAL,
        tracking_id: str = DEMO_TRACKING_ID,
        store_email: str = DEMO_STORE_EMAIL,
        studio: str = DEMO_STUDIO,
        number: int = 0,
        seed: int | None = None,
    ):
        self.send = send
        self.interval = interval
        self.store_email = store_email
        self.studio = studio
        self.recipient = f"lead-tracking+{tracking_id}@{TRACKING_DOMAIN}"
        self.number = number
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def next(self) -> Notification:
        with self._lock:
            number, self.number = self.number, self.number + 1
            rng = random.Random(self._random.getrandbits(64))
        first, last = rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES)
        area, line = AREA_CODES[number % len(AREA_CODES)], 100 + number // len(AREA_CODES) % 100
        person = Person(first_name=first, last_name=last, email=f"{_ascii(first)}.{_ascii(last)}@example.com",
                        phone=f"+1{area}5550{line}", service=rng.choice(SERVICES))  # fmt: skip
        return FORMATS[number % len(FORMATS)](self, person, rng, datetime.now().astimezone())

    def start(self) -> "Notifier":
        self._stopped.clear()
        self._thread = threading.Thread(target=self._run, name="lead-notifier", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopped.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        delay = min(FIRST_AFTER, self.interval)
        while not self._stopped.wait(delay):
            self.send(self.next())
            delay = self.interval
