"""Hostile lead-notification emails: each aims at one slow path of a naive email parser.

Shared by the parser's tests and bench/imap (the slowest must parse in under 100 ms).
"""

HEADERS = (
    "From: Studio <studio0421@otf-mail.example.com>\r\n"
    "To: lead-tracking+ST0421@leads.example.org\r\n"
    "Subject: New Web Lead: Jane Doe\r\n"
    "Date: Mon, 16 Mar 2026 18:00:00 +0000\r\n"
    "MIME-Version: 1.0\r\n"
)
LEAD = b"Lead Type: Web Lead\r\nFirst Name: Jane\r\nLast Name: Doe\r\nPhone: (415) 555-0132\r\n"


def _single(body: bytes, subtype: str = "plain", headers: str = HEADERS) -> bytes:
    return (headers + f"Content-Type: text/{subtype}; charset=utf-8\r\n\r\n").encode() + body


def megabyte_lines() -> bytes:
    """A lead, then 1 MB lines: one of address characters after `Email:`, one of letters, one of spaces."""
    run = 1_000_000
    return _single(LEAD + b"Email: " + b"a" * run + b"\r\n" + b"x" * run + b"\r\n" + b" " * run + b">\r\n")


def unclosed_tags() -> bytes:
    """40 KB of `<a` ending an HTML part: every unclosed tag made HTMLParser rescan the rest."""
    return _single(b"<html><body><p>Phone: (415) 555-0132</p>" + b"<a" * 20_000, "html")


def forwarded_to_40000() -> bytes:
    """A forward whose quoted `To:` line names 40,000 addresses."""
    addresses = b", ".join(b"person%d@example.com" % n for n in range(40_000))
    forward = b"---------- Forwarded message ---------\r\nFrom: Studio <studio@example.com>\r\nTo: " + addresses
    return _single(forward + b"\r\nSubject: New Web Lead\r\n\r\n" + LEAD)


def header_to_40000() -> bytes:
    """The message's own To header names 40,000 addresses."""
    addresses = ", ".join(f"person{n}@example.com" for n in range(40_000))
    return _single(LEAD, headers=HEADERS.replace("To: lead-tracking+ST0421@leads.example.org", "To: " + addresses))


def deep_nesting(depth: int = 2_000) -> bytes:
    """Multiparts nested 2,000 deep around the lead."""
    head = HEADERS.encode()
    for level in range(depth):
        head += b'Content-Type: multipart/mixed; boundary="b%d"\r\n\r\n--b%d\r\n' % (level, level)
    tail = b"".join(b"\r\n--b%d--\r\n" % level for level in reversed(range(depth)))
    return head + b"Content-Type: text/plain\r\n\r\n" + LEAD + tail


def many_parts(count: int = 10_000) -> bytes:
    """10,000 text parts in one multipart."""
    body = b"".join(b"--p\r\nContent-Type: text/plain\r\n\r\nPart %d\r\n" % n for n in range(count))
    return HEADERS.encode() + b'Content-Type: multipart/mixed; boundary="p"\r\n\r\n' + body + b"--p--\r\n"


def header_lines(count: int = 400_000) -> bytes:
    """2 MB of header: 400,000 `X: a` lines after the real header fields (every header lookup reads them all)."""
    return _single(LEAD, headers=HEADERS + "X: a\n" * count)


def part_header_lines(count: int = 400_000) -> bytes:
    """The same 400,000 header lines in the header of the one text part."""
    part = b"--p\r\n" + b"X: a\n" * count + b"Content-Type: text/plain\r\n\r\n" + LEAD + b"\r\n--p--\r\n"
    return HEADERS.encode() + b'Content-Type: multipart/mixed; boundary="p"\r\n\r\n' + part


def short_lines(count: int = 1_000_000) -> bytes:
    """A lead, then a million one-letter lines."""
    return _single(LEAD + b"a\n" * count)


HOSTILE_MESSAGES = {
    "1 MB lines": megabyte_lines,
    "40 KB of <a": unclosed_tags,
    "forwarded To: of 40,000 addresses": forwarded_to_40000,
    "To: header of 40,000 addresses": header_to_40000,
    "MIME nested 2,000 deep": deep_nesting,
    "10,000 parts": many_parts,
    "400,000 header lines": header_lines,
    "400,000 lines in a part's header": part_header_lines,
    "1,000,000 short lines": short_lines,
}
