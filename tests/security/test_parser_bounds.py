"""No email and no text to redact can hold a worker: header lines, lines and URL-like runs are bounded.

Timings are CPU seconds of the thread doing the work, so a busy machine, or the threads other tests left
running in this process, do not fail them; each bound is several times what the bounded code takes and a
fraction of what the unbounded code took.
"""

import time

import pytest

from crm.redaction import redact
from standins.hostile_emails import HEADERS, LEAD, _single, header_lines, part_header_lines, short_lines
from tracking.parsing import HEADER_MAX_LINES, parse_lead_email, sender_authentication


def cpu_seconds(work, *args):
    started = time.thread_time()
    result = work(*args)
    return time.thread_time() - started, result


def test_a_header_of_400000_lines_is_a_failed_lead_read_quickly():
    seconds, parsed = cpu_seconds(parse_lead_email, header_lines())

    assert seconds < 0.5
    assert parsed.parse_error == f"header too long: over {HEADER_MAX_LINES:,} lines; its body was not read"
    # The fields we read come before the flood: they are still shown to staff.
    assert (parsed.subject, parsed.email_from, parsed.tracking_id) == (
        "New Web Lead: Jane Doe", "studio0421@otf-mail.example.com", "ST0421"
    )  # fmt: skip
    assert parsed.first_name == "" and parsed.raw_body == ""


def test_a_long_but_plausible_header_still_parses():
    relays = "".join(f"Received: from relay{n}.example.net by mx.example.org;\r\n\tMon, 16 Mar 2026\r\n"
                     for n in range(HEADER_MAX_LINES // 2 - 10))  # fmt: skip
    parsed = parse_lead_email(_single(LEAD, headers=relays + HEADERS))
    assert (parsed.parse_error, parsed.first_name, parsed.phone) == ("", "Jane", "+14155550132")


def test_header_lines_in_a_part_and_short_lines_are_bounded_too():
    for raw in (part_header_lines(), short_lines()):
        seconds, parsed = cpu_seconds(parse_lead_email, raw)
        # About 0.05 s here on a quiet host, 0.4 s seen on a busy one; the unbounded parser took 0.9 and 1.7 s.
        assert seconds < 0.6
        assert parsed.subject == "New Web Lead: Jane Doe"
    assert parse_lead_email(short_lines()).first_name == "Jane"  # the lead comes before the lines


def test_our_servers_authentication_results_are_read_within_the_bound():
    ours = "Authentication-Results: mx.example.org; dmarc=pass header.from=otf-mail.example.com\r\n"
    raw = _single(LEAD, headers=ours + HEADERS + "X: a\n" * 400_000)
    assert sender_authentication(raw, authserv_id="mx.example.org").passes_for("otf-mail.example.com")


@pytest.mark.parametrize(
    "text",
    [
        "a." * 16_000 + "@",
        "a." * 16_000 + "@ then postgres://leads:s3cr3t@db:5432/app",
        "x-" * 16_000 + "://@",
    ],
    ids=["dotted run", "dotted run next to a URL", "hyphen run before ://"],
)
def test_redacting_a_long_scheme_like_run_is_linear(text):
    seconds, redacted = cpu_seconds(redact, text)
    assert seconds < 0.5
    assert "s3cr3t" not in redacted


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("see a.b.postgres://leads:s3cr3t@db:5432/app", "see a.b.postgres://[URL_CREDENTIALS]@db:5432/app"),
        ("x" * 5_000 + "https://bob:pw@example.com", "x" * 5_000 + "https://[URL_CREDENTIALS]@example.com"),
        ("amqp://u:p@ss@broker/vhost and a.b.c@", "amqp://[URL_CREDENTIALS]@broker/vhost and a.b.c@"),
        ("-redis://:p4ss@cache:6379/0", "-redis://[URL_CREDENTIALS]@cache:6379/0"),
    ],
)
def test_url_credentials_are_still_found(text, expected):
    assert redact(text) == expected
