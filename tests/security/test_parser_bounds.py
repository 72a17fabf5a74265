"""No email and no text to redact can hold a worker: header lines, lines and URL-like runs are bounded.

A hostile input is timed against a plain one of the same size, each the best of three runs of the
thread's CPU time, so a slow or busy machine slows both alike. What must hold: the hostile input costs
a small multiple of the plain one (two to five times here), where the unbounded code cost twenty times
and more.
"""

import time

import pytest

from crm.redaction import redact
from standins.hostile_emails import HEADERS, LEAD, _single, header_lines, part_header_lines, short_lines
from tracking.parsing import HEADER_MAX_LINES, parse_lead_email, sender_authentication


def cost_against_plain(work, hostile, plain):
    """The hostile input's CPU time over the plain input's, and the hostile input's result."""

    def best_of_three(given):
        times = []
        for _ in range(3):
            started = time.thread_time()
            result = work(given)
            times.append(time.thread_time() - started)
        return min(times), result

    plain_seconds, _ = best_of_three(plain)
    hostile_seconds, result = best_of_three(hostile)
    return hostile_seconds / plain_seconds, result


def plain_email(size: int) -> bytes:
    """A lead email padded to `size` bytes with ordinary 80-byte lines."""
    return _single(LEAD + (b"x" * 78 + b"\r\n") * (size // 80))


def test_a_header_of_400000_lines_is_a_failed_lead_read_quickly():
    raw = header_lines()
    ratio, parsed = cost_against_plain(parse_lead_email, raw, plain_email(len(raw)))

    assert ratio < 8
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
        ratio, parsed = cost_against_plain(parse_lead_email, raw, plain_email(len(raw)))
        # About 2 to 3; the unbounded parser took 20 and 35 times the plain email.
        assert ratio < 8
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
    plain = ("Call me on Tuesday about the studio. " * 1_000)[: len(text)]
    ratio, redacted = cost_against_plain(redact, text, plain)
    # At most about 6 (the URL's own patterns run too); the quadratic pattern took hundreds of times.
    assert ratio < 15
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
