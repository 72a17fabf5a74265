"""A message over the size limit is never downloaded whole: nor is its header, however large (real dovecot)."""

import pytest

from integrations.imap.client import ImapClient
from leadgen.models import Lead
from standins.lead_emails import lead_message
from tests.tracking.support import seen_flags
from tracking.selectors import mailbox_settings
from tracking.services import mailbox_poll

pytestmark = pytest.mark.django_db

LIMIT = 50_000


def header_heavy_lead() -> bytes:
    """A lead whose header carries 1.6 MB of padding fields after From, To and Subject."""
    padding = b"".join(b"X-Padding-%06d: %s\n" % (n, b"p" * 60) for n in range(20_000))
    return lead_message(first="Heavy").replace(b"Content-Type:", padding + b"Content-Type:", 1)


def test_only_the_start_of_a_large_messages_header_is_downloaded(mailbox, settings):
    mailbox.deliver(header_heavy_lead())

    with ImapClient(mailbox_settings("env"), timeout=10, ca_file=settings.IMAP_CA_FILE) as client:
        (message,) = client.fetch(client.search(), max_bytes=LIMIT)

    assert message.header_only and message.size > 1_500_000
    assert len(message.raw) <= 64 * 1024
    assert message.raw.startswith(b"From: Studio <studio0421@otf-mail.example.com>")


def test_a_large_message_with_a_large_header_is_kept_as_a_failed_lead(mailbox, make_store, settings):
    make_store()
    settings.IMAP_MAX_MESSAGE_BYTES = LIMIT
    mailbox.deliver(header_heavy_lead(), lead_message(first="Small", phone="(415) 555-0199"))

    result = mailbox_poll(mailbox=mailbox_settings("env"))

    assert result.captured == 2
    heavy, small = Lead.objects.order_by("first_name")
    assert (small.first_name, small.parse_state) == ("Small", Lead.ParseState.PARSED)
    assert heavy.parse_state == Lead.ParseState.FAILED and "message too large" in heavy.parse_error
    assert heavy.email_subject == "New Web Lead: Heavy Doe" and heavy.raw_body == ""
    assert set(seen_flags(mailbox.server, mailbox.username, mailbox.password).values()) == {True}
