"""The lead-email parser on real-looking notification emails: every encoding, forwards, odd phones.

The .eml files in emails/ are fixtures of each format: plain text, HTML only,
quoted-printable, base64, a text part that is only a "view in browser" stub,
a forward, a forward of a forward, and messages that hold no lead.
"""

import json
import re
from datetime import UTC, date, datetime, time, timedelta, timezone
from pathlib import Path

import phonenumbers
import pytest
from django.core.management import call_command
from hypothesis import assume, given
from hypothesis import strategies as st

from standins.lead_emails import lead_message
from tracking.parsing import ParsedLeadEmail, lead_dedup_key, normalize_phone, parse_lead_email

EMAILS = Path(__file__).parent / "emails"
E164 = re.compile(r"^\+[1-9]\d{1,14}$")


def parse(name, **kwargs) -> ParsedLeadEmail:
    return parse_lead_email((EMAILS / name).read_bytes(), **kwargs)


EXPECTED = {
    "web_lead_plain.eml": {
        "lead_type": "Web Lead", "first_name": "Jane", "last_name": "Doe", "email": "jane.doe@example.com",
        "phone": "+14155550132", "subject": "New Web Lead: Jane Doe",
        "email_from": "Studio0421@otf-mail.example.com", "email_recipient": "lead-tracking+ST0421@leads.example.org",
        "tracking_id": "ST0421", "is_forwarded": False, "received_at": datetime(2026, 3, 16, 18, 5, 9, tzinfo=UTC),
    },
    "online_intro_html_only.eml": {
        "lead_type": "Online Intro", "first_name": "José", "last_name": "Núñez", "email": "jose@example.com",
        "phone": "+12125550100", "booked_date": date(2026, 3, 16), "booked_time": time(18, 30),
        "subject": "New Online Intro - José Núñez", "tracking_id": "MID-7",
    },
    "web_lead_base64_alternative.eml": {
        "lead_type": "Web Lead", "first_name": "Zoë", "last_name": "Ångström", "email": "zoe@example.com",
        "phone": "+16465550199", "subject": "New Web Lead — Zoë", "tracking_id": "UPT1",
        "received_at": datetime(2026, 3, 17, 16, 15, tzinfo=UTC),
    },
    "web_lead_quoted_printable.eml": {
        "lead_type": "Web Lead", "first_name": "Renée", "last_name": "Lefèvre", "phone": "+14155550188",
        "tracking_id": "", "email_recipient": "leads@leads.example.org",
    },
    "html_with_browser_stub_text.eml": {
        "lead_type": "Online Intro", "first_name": "Kim", "last_name": "Lee", "phone": "+14155550166",
        "booked_date": date(2026, 3, 19), "booked_time": time(7, 15),
    },
    "forwarded_gmail.eml": {
        "lead_type": "Online Intro", "first_name": "Sam", "last_name": "O'Neil", "phone": "+14155550177",
        "booked_date": date(2026, 3, 18), "booked_time": time(7, 15), "is_forwarded": True,
        "email_from": "manager@downtown-gym.example.com", "tracking_id": "ST0421",
        "forwarded_original_from": "bookings@otf-mail.example.com",
        "forwarded_original_to": "downtown@studio.example.com",
        "forwarded_original_date": "Mon, Mar 16, 2026 at 2:05 PM",
    },
    "forward_of_forward.eml": {
        "lead_type": "Web Lead", "first_name": "Ana", "last_name": "Silva", "email": "ana.silva@example.co.uk",
        "phone": "+442079460958", "is_forwarded": True, "email_from": "region@franchise-hq.example.com",
        "subject": "Fwd: FW: New Web Lead",
        # The innermost forward is the original notification.
        "forwarded_original_from": "noreply@otf-mail.example.com",
        "forwarded_original_to": "downtown@studio.example.com",
        "forwarded_original_date": "Monday, March 16, 2026 11:58 PM",
    },
    "web_lead_without_phone.eml": {
        "lead_type": "Web Lead", "first_name": "Pat", "last_name": "Morgan", "email": "pat@example.com", "phone": "",
    },
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_notification_format_parses(name):
    parsed = parse(name)
    assert parsed.parse_error == ""
    assert {field: getattr(parsed, field) for field in EXPECTED[name]} == EXPECTED[name]
    assert parsed.raw_body


def test_html_only_keeps_the_decoded_html_as_raw_body_and_ignores_other_phone_numbers():
    parsed = parse("online_intro_html_only.eml")
    assert parsed.raw_body.startswith("<!DOCTYPE html>")
    assert "Núñez" in parsed.raw_body, "quoted-printable UTF-8 is decoded"
    assert parsed.phone == "+12125550100", "the studio's own number in the text is not the lead's"


def test_quoted_printable_soft_line_breaks_are_joined():
    parsed = parse("web_lead_quoted_printable.eml")
    assert "in particular the family plans" in parsed.raw_body


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("newsletter_unparseable.eml", "no lead details found: no name, phone or email in the body"),
        ("attachment_only.eml", "no text/plain or text/html part"),
    ],
)
def test_a_message_without_a_lead_is_a_failed_parse_with_its_reason_and_body(name, reason):
    parsed = parse(name)
    assert parsed.parse_error == reason
    assert parsed.raw_body
    assert parsed.email_from and parsed.received_at, "the headers are still read"


def test_an_invalid_phone_alone_is_a_failed_parse_that_says_so():
    raw = lead_message(first="", last="", phone="555-555-5555", lead_type="Web Lead")
    parsed = parse_lead_email(raw)
    assert parsed.phone == ""
    assert parsed.parse_error == "no lead details found: the phone is not a valid number, and there is no name or email"


def test_bytes_that_are_not_an_email_do_not_raise():
    parsed = parse_lead_email(b"\x00\xff garbage without headers")
    assert parsed.parse_error
    assert parsed.phone == "" and parsed.first_name == ""


def test_an_unknown_charset_is_decoded_leniently():
    raw = (
        b"From: studio0421@otf-mail.example.com\nTo: lead-tracking+ST0421@leads.example.org\nSubject: New Web Lead\n"
        b"Content-Type: text/plain; charset=x-no-such-charset\n\nName: Jane Doe\nPhone: 415 555 0132\n"
    )
    parsed = parse_lead_email(raw)
    assert (parsed.first_name, parsed.phone) == ("Jane", "+14155550132")


def test_received_at_prefers_the_imap_internaldate():
    arrived = datetime(2026, 3, 16, 20, 0, 0, 123456, tzinfo=timezone(timedelta(hours=-4)))
    parsed = parse("web_lead_plain.eml", received_at=arrived)
    assert parsed.received_at == datetime(2026, 3, 17, 0, 0, 0, tzinfo=UTC)


def test_tracking_id_from_other_recipient_headers():
    raw = (
        b"From: studio0421@otf-mail.example.com\nTo: Front Desk <desk@studio.example.com>\n"
        b"Delivered-To: LEAD-TRACKING+Ab_9.x@leads.example.org\nSubject: New Web Lead\n\nName: Jane Doe\n"
    )
    parsed = parse_lead_email(raw)
    assert parsed.tracking_id == "Ab_9.x"
    assert parsed.email_recipient == "LEAD-TRACKING+Ab_9.x@leads.example.org"


def test_a_label_on_its_own_line_above_its_value():
    html = (
        b"From: a@studio.example.com\nTo: lead-tracking+X1@leads.example.org\nSubject: Booking\n"
        b"Content-Type: text/html\n\n<p><b>Lead type</b></p><p>Online Intro</p><p><b>Phone</b></p>"
        b"<p>+1 (415) 555-0199 (mobile)</p><p><b>Appointment</b></p><p>Sept 3rd, 2026 @ 5pm</p>"
    )
    parsed = parse_lead_email(html)
    assert (parsed.lead_type, parsed.phone) == ("Online Intro", "+14155550199")
    assert (parsed.booked_date, parsed.booked_time) == (date(2026, 9, 3), time(17, 0))


def test_the_name_may_come_from_the_subject():
    raw = lead_message(first="", last="", phone="4155550132")
    raw = raw.replace(b"Subject: New Web Lead:", b"Subject: New Web Lead: Jo Ann Smith")
    parsed = parse_lead_email(raw)
    assert (parsed.first_name, parsed.last_name) == ("Jo", "Ann Smith")


ODD_PHONES = {
    "(415) 555-0132": "+14155550132",
    "415.555.0132": "+14155550132",
    "415 555 0132": "+14155550132",
    "4155550132": "+14155550132",
    "1-415-555-0132": "+14155550132",
    "+1 (415) 555-0132": "+14155550132",
    "+1.415.555.0132": "+14155550132",
    "tel:+14155550132": "+14155550132",
    "(415) 555-0132 ext. 12": "+14155550132",
    "415-555-0132 x12": "+14155550132",
    "(415) 555-0132 (cell)": "+14155550132",
    "Cell: 415/555-0132": "+14155550132",
    "+44 20 7946 0958": "+442079460958",
    "011 44 20 7946 0958": "+442079460958",
    "+61 2 9374 4000": "+61293744000",
    "555-555-5555": "",
    "12345": "",
    "call me!": "",
    "": "",
}


@pytest.mark.parametrize(("text", "expected"), ODD_PHONES.items())
def test_odd_phone_formats_normalize_to_e164(text, expected):
    assert normalize_phone(text, "US") == expected


def test_national_numbers_follow_the_configured_region():
    assert normalize_phone("020 7946 0958", "GB") == "+442079460958"
    assert normalize_phone("020 7946 0958", "US") == ""


@pytest.mark.parametrize("label", ["Phone Number", "Mobile", "Cell Phone", "Telephone", "Tel", "Contact Number"])
@pytest.mark.parametrize("html", [False, True])
def test_phone_labels_in_text_and_html_bodies(label, html):
    raw = lead_message(phone="(646) 555-0199", html=html).replace(b"Phone", label.encode())
    assert parse_lead_email(raw).phone == "+16465550199"


def test_parsed_fields_survive_the_retry_job_payload():
    for path in EMAILS.glob("*.eml"):
        parsed = parse_lead_email(path.read_bytes())
        payload = json.loads(json.dumps(parsed.to_json()))
        assert ParsedLeadEmail.from_json(payload) == parsed, path.name


def test_parse_lead_email_command_prints_json(capsys):
    call_command("parse_lead_email", str(EMAILS / "forwarded_gmail.eml"), str(EMAILS / "newsletter_unparseable.eml"))
    [forward, newsletter] = json.loads(capsys.readouterr().out)
    assert forward["file"].endswith("forwarded_gmail.eml")
    assert forward["phone"] == "+14155550177" and forward["booked_date"] == "2026-03-18"
    assert forward["dedup_key"] == "manager@downtown-gym.example.com#+14155550177#2026-03-16"
    assert newsletter["parse_error"].startswith("no lead details found")


# --- properties --------------------------------------------------------------------------------

AREA_CODES = ["212", "305", "312", "415", "512", "617", "646", "702", "206", "303"]
FORMATS = [
    "({a}) {e}-{l}", "{a}.{e}.{l}", "{a}-{e}-{l}", "{a} {e} {l}", "{a}{e}{l}", "1-{a}-{e}-{l}", "1 ({a}) {e}-{l}",
    "+1 {a} {e} {l}", "+1-{a}-{e}-{l}", "+1 ({a}) {e}-{l}", "+1{a}{e}{l}", "tel:+1{a}{e}{l}",
]  # fmt: skip


@st.composite
def us_numbers(draw):
    area = draw(st.sampled_from(AREA_CODES))
    exchange = str(draw(st.integers(200, 999)))
    line = f"{draw(st.integers(0, 9999)):04d}"
    assume(phonenumbers.is_valid_number(phonenumbers.parse(f"+1{area}{exchange}{line}")))
    return area, exchange, line


@given(
    number=us_numbers(),
    fmt=st.sampled_from(FORMATS),
    extension=st.sampled_from(["", " ext. 12", " x7", " ext 305"]),
    before=st.sampled_from(["", "Call ", "mobile: ", "☎ "]),
    after=st.sampled_from(["", " (mobile)", " after 5", ", thanks"]),
)
def test_every_way_of_writing_a_us_number_gives_the_same_e164(number, fmt, extension, before, after):
    area, exchange, line = number
    written = before + fmt.format(a=area, e=exchange, l=line) + extension + after
    expected = f"+1{area}{exchange}{line}"
    assert normalize_phone(written, "US") == expected
    assert normalize_phone(expected, "US") == expected, "normalizing is idempotent"
    assert normalize_phone(expected, "GB") == expected, "a number with its country code ignores the region"


@given(st.text(max_size=60), st.sampled_from(["US", "GB", "DE", "AU"]))
def test_normalizing_any_text_gives_e164_or_nothing(text, region):
    result = normalize_phone(text, region)
    assert result == "" or E164.match(result)
    if result:
        assert normalize_phone(result, region) == result


emails = st.emails().map(lambda address: address[:200])
moments = st.datetimes(
    min_value=datetime(2020, 1, 1),
    max_value=datetime(2035, 1, 1),
    timezones=st.sampled_from([UTC, timezone(timedelta(hours=-7)), timezone(timedelta(hours=5, minutes=30))]),
)


@given(email=emails, phone=st.sampled_from(["+14155550132", "+442079460958"]), first=moments, second=moments)
def test_dedup_key_with_a_phone_is_one_per_sender_phone_and_utc_day(email, phone, first, second):
    key = lead_dedup_key(email=email, phone=phone, received_at=first)
    assert key == lead_dedup_key(email=f"  {email.upper()} ", phone=phone, received_at=first)
    same_day = first.astimezone(UTC).date() == second.astimezone(UTC).date()
    assert (key == lead_dedup_key(email=email, phone=phone, received_at=second)) == same_day
    assert key.endswith(f"#{phone}#{first.astimezone(UTC).date().isoformat()}")


@given(email=emails, first=moments, second=moments)
def test_dedup_key_without_a_phone_is_one_per_sender_and_second(email, first, second):
    key = lead_dedup_key(email=email, phone="", received_at=first)
    same_second = first.astimezone(UTC).replace(microsecond=0) == second.astimezone(UTC).replace(microsecond=0)
    assert (key == lead_dedup_key(email=email, phone="", received_at=second)) == same_second
    assert key == lead_dedup_key(email=email, phone="", received_at=first.astimezone(timezone(timedelta(hours=9))))
    assert key != lead_dedup_key(email=email, phone="+14155550132", received_at=first), "the two forms never meet"
