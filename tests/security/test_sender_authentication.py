"""With IMAP_TRUSTED_AUTHSERV_ID set, a notification creates a task only if our receiving server saw the
store's domain pass DMARC or SPF; a forged one is kept as a failed lead that says why."""

import pytest

from crm.models import Task
from leadgen.models import Lead
from standins.lead_emails import STORE_SENDER, lead_message
from tests.tracking.support import run_jobs
from tracking.selectors import mailbox_settings
from tracking.services import mailbox_poll

pytestmark = pytest.mark.django_db

OURS = "mx.leads.example.org"
STORE_DOMAIN = STORE_SENDER.rpartition("@")[2]


def with_results(raw: bytes, *values: str) -> bytes:
    headers = b"".join(b"Authentication-Results: " + value.encode() + b"\r\n" for value in values)
    return headers + raw


@pytest.fixture
def checked(settings, mailbox, make_store):
    settings.IMAP_TRUSTED_AUTHSERV_ID = OURS
    make_store()
    return mailbox


def captured(checked, *messages) -> dict[str, Lead]:
    checked.deliver(*messages)
    mailbox_poll(mailbox=mailbox_settings("env"))
    run_jobs("crm.lead_created")
    return {lead.first_name or lead.email_subject: lead for lead in Lead.objects.all()}


def test_only_notifications_our_server_authenticated_create_tasks(checked):
    leads = captured(
        checked,
        with_results(lead_message(first="Dmarc", phone="(415) 555-0101"),
                     f"{OURS}; dkim=pass header.d={STORE_DOMAIN}; dmarc=pass (p=reject) header.from={STORE_DOMAIN}"),
        with_results(lead_message(first="Spf", phone="(415) 555-0102"),
                     f"{OURS} 1; spf=pass smtp.mailfrom=bounces@{STORE_DOMAIN}"),
        lead_message(first="Bare", phone="(415) 555-0103"),
        with_results(lead_message(first="Elsewhere", phone="(415) 555-0104"),
                     f"mx.attacker.example; dmarc=pass header.from={STORE_DOMAIN}"),
        with_results(lead_message(first="Failing", phone="(415) 555-0105"),
                     f"{OURS}; spf=fail smtp.mailfrom=x@{STORE_DOMAIN}; dmarc=fail header.from={STORE_DOMAIN}"),
        with_results(lead_message(first="Unaligned", phone="(415) 555-0106"),
                     f"{OURS}; dmarc=pass header.from=attacker.example"),
    )  # fmt: skip
    parsed = {name for name, lead in leads.items() if lead.parse_state == Lead.ParseState.PARSED}
    assert parsed == {"Dmarc", "Spf"}
    assert Task.objects.count() == 2
    for name in ("Bare", "Elsewhere", "Failing", "Unaligned"):
        failed = next(lead for lead in Lead.objects.all() if lead.email_subject.endswith(name + " Doe"))
        assert failed.parse_state == Lead.ParseState.FAILED
        assert failed.parse_error.startswith(f"sender not authenticated for {STORE_DOMAIN}")
    failing = next(lead for lead in Lead.objects.all() if lead.email_subject.endswith("Failing Doe"))
    assert "dmarc=fail" in failing.parse_error


def test_unset_the_check_is_off(settings, mailbox, make_store):
    make_store()
    settings.IMAP_TRUSTED_AUTHSERV_ID = ""
    mailbox.deliver(lead_message())
    mailbox_poll(mailbox=mailbox_settings("env"))
    assert Lead.objects.get().parse_state == Lead.ParseState.PARSED
