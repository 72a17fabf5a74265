"""A poll writes each fetched batch in one transaction: the new leads in one INSERT, their LeadCreated jobs in
another. Same outcome as one message at a time: a lead per dedup key, one LeadCreated per lead, a message
that keeps stopping polls parked alone, concurrent polls writing nothing twice."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from crm.intake import LEAD_CREATED
from jobs.models import Job
from leadgen.models import Lead
from standins.lead_emails import lead_message
from tests.tracking.support import at_once, seen_flags
from tracking import services
from tracking.selectors import mailbox_settings
from tracking.services import mailbox_poll


def poll():
    return mailbox_poll(mailbox=mailbox_settings("env"))


def phone(n: int) -> str:
    return f"(415) 555-{n:04d}"


@pytest.mark.django_db
def test_a_batch_is_one_insert_of_leads_and_one_of_jobs_whatever_its_size(mailbox, make_store):
    make_store()
    mailbox.deliver(*[lead_message(first=f"Lead{n}", phone=phone(n)) for n in range(30)])
    mailbox.deliver(lead_message(first="Lead7", phone=phone(7)))  # the same person notified twice: one lead

    with CaptureQueriesContext(connection) as queries:
        result = poll()

    assert (result.found, result.captured, result.parked) == (31, 31, 0)
    inserts = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("INSERT")]
    # The 30 new leads in one; the second sighting of Lead7 on its own (it finds its lead and refreshes it).
    assert sum('"leadgen_lead"' in sql for sql in inserts) == 2
    assert sum('"jobs_job"' in sql for sql in inserts) == 1
    assert Lead.objects.count() == 30
    assert Lead.objects.filter(first_name="Lead7").count() == 1
    lead_created = Job.objects.filter(kind=LEAD_CREATED)
    assert lead_created.count() == 30
    lead_ids = set(Lead.objects.values_list("pk", flat=True))
    assert set(lead_created.values_list("payload__lead_id", flat=True)) == lead_ids
    assert set(seen_flags(mailbox.server, mailbox.username, mailbox.password).values()) == {True}


class PollStopped(BaseException):
    """What a worker's time limit or a kill does to a poll: nothing after it runs."""


@pytest.mark.django_db
def test_a_message_that_keeps_stopping_polls_is_parked_alone(mailbox, make_store, monkeypatch, settings):
    make_store()
    settings.IMAP_MESSAGE_MAX_ATTEMPTS = 3
    settings.IMAP_MESSAGE_READ_SECONDS = 0  # the stopped polls count at once, as they would a minute later
    mailbox.deliver(*[lead_message(first=f"Lead{n}", phone=phone(n)) for n in range(1, 6)])
    parse = services.parse_lead_email

    def stops_on_lead3(raw, **kwargs):
        if b"Lead3" in raw:
            raise PollStopped
        return parse(raw, **kwargs)

    monkeypatch.setattr(services, "parse_lead_email", stops_on_lead3)
    for _ in range(3):
        with pytest.raises(PollStopped):
            poll()

    result = poll()

    assert (result.captured, result.failed_parse) == (5, 1)
    failed = Lead.objects.get(parse_state=Lead.ParseState.FAILED)
    assert "Lead3" in failed.email_subject
    assert "3 earlier polls started on this message and never finished it" in failed.parse_error
    parsed = Lead.objects.filter(parse_state=Lead.ParseState.PARSED)
    assert sorted(parsed.values_list("first_name", flat=True)) == ["Lead1", "Lead2", "Lead4", "Lead5"]
    assert set(seen_flags(mailbox.server, mailbox.username, mailbox.password).values()) == {True}


@pytest.mark.django_db(transaction=True)
def test_four_concurrent_polls_write_each_lead_and_its_leadcreated_once(mailbox, make_store, settings):
    make_store()
    settings.IMAP_FETCH_BATCH = 7
    mailbox.deliver(*[lead_message(first=f"Lead{n}", phone=phone(n)) for n in range(40)])
    results, errors = at_once(poll)

    assert errors == []
    assert sum(result.parked + result.left_unseen for result in results) == 0
    assert Lead.objects.count() == 40
    assert Job.objects.filter(kind=LEAD_CREATED).count() == 40
    assert set(seen_flags(mailbox.server, mailbox.username, mailbox.password).values()) == {True}
