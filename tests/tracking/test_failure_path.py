"""The database fails mid-poll, for real: PostgreSQL triggers make writes to the leads table raise.

No message is marked \\Seen without its lead saved or parked as a retry job;
five failures in a row open the breaker, which parks the rest without trying;
after recovery the retry processor delivers each parked lead into the same
LeadCreated as the happy path; a lead that keeps failing is dead-lettered,
alerted, and replayable.
"""

import uuid
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

import pybreaker
import pytest
from django.core import mail
from django.db import connection
from django.utils import timezone

import jobs
from crm.intake import LEAD_CREATED
from crm.models import Contact, Task, TimelineEvent
from jobs.breaker import CacheCircuitStorage
from jobs.models import Job
from leadgen.models import Lead
from standins.lead_emails import lead_message
from tests.tracking.support import at_once, run_jobs, seen_flags
from tracking.parsing import parse_lead_email
from tracking.selectors import mailbox_settings
from tracking.services import (
    LEAD_RETRY_KIND,
    LEAD_WRITE_BREAKER,
    email_lead_capture,
    lead_write_breaker,
    mailbox_poll,
)

pytestmark = [pytest.mark.django_db(transaction=True)]


@contextmanager
def failing_writes(table: str, condition: str):
    """Inserts and updates of `table` rows matching `condition` fail, as a lock timeout would."""
    name = f"test_fault_{uuid.uuid4().hex[:10]}"
    with connection.cursor() as cursor:
        cursor.execute(
            f"CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            f"RAISE EXCEPTION 'injected fault' USING ERRCODE = 'lock_not_available'; END $$"
        )
        cursor.execute(
            f"CREATE TRIGGER {name} BEFORE INSERT OR UPDATE ON {table} FOR EACH ROW "
            f"WHEN ({condition}) EXECUTE FUNCTION {name}()"
        )
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"DROP TRIGGER IF EXISTS {name} ON {table}")
            cursor.execute(f"DROP FUNCTION IF EXISTS {name}()")


def poll():
    return mailbox_poll(mailbox=mailbox_settings("env"))


def phone(n: int) -> str:
    return f"(415) 555-{n:04d}"


def assert_every_seen_message_is_captured(mailbox):
    """The invariant: a \\Seen message has its lead saved, or parked as a retry job."""
    saved = set(Lead.objects.values_list("phone", flat=True))
    keys = Job.objects.filter(kind=LEAD_RETRY_KIND).values_list("key", flat=True)
    parked = {int(key.rsplit(":", 1)[1]) for key in keys}  # keys end in the message's UID
    for uid, seen in seen_flags(mailbox.server, mailbox.username, mailbox.password).items():
        if seen:
            assert f"+1415555{uid:04d}" in saved or uid in parked, f"message {uid} is seen but not captured"


def test_database_failure_mid_poll_parks_leads_opens_the_breaker_and_retries_deliver(mailbox, make_store):
    make_store()
    # UIDs 1-3 write fine; 4-10 come from senders whose rows the database refuses; 11 is fine again.
    messages = [lead_message(first=f"Lead{uid}", phone=phone(uid)) for uid in (1, 2, 3)]
    messages += [
        lead_message(first=f"Lead{uid}", phone=phone(uid), sender=f"fail{uid}@x.example") for uid in range(4, 11)
    ]
    messages.append(lead_message(first="Lead11", phone=phone(11)))
    mailbox.deliver(*messages)

    with failing_writes("leadgen_lead", "NEW.email_from LIKE 'fail%'"):
        before = timezone.now()
        result = poll()

        assert (result.found, result.captured, result.parked, result.left_unseen) == (11, 3, 8, 0)
        assert set(seen_flags(mailbox.server, mailbox.username, mailbox.password).values()) == {True}
        assert_every_seen_message_is_captured(mailbox)
        assert lead_write_breaker().current_state == pybreaker.STATE_OPEN, "5 failures in a row open it"
        parked = {int(job.key.rsplit(":", 1)[1]): job for job in Job.objects.filter(kind=LEAD_RETRY_KIND)}
        assert sorted(parked) == list(range(4, 12)), "UID 11 is parked unread: the breaker is open"
        assert {job.max_attempts for job in parked.values()} == {3}
        for uid in (4, 5, 6, 7):  # failed with the breaker closed: retried after LEAD_RETRY_DELAY_SECONDS
            assert before + timedelta(seconds=119) <= parked[uid].run_after <= timezone.now() + timedelta(seconds=120)
        for uid in (8, 9, 10, 11):  # the breaker is open: the first retry waits until it lets a write through
            assert parked[uid].run_after >= before + timedelta(seconds=899)

        # A retry while the breaker is open does not touch the database; it waits for the breaker.
        Job.objects.filter(pk=parked[11].pk).update(run_after=timezone.now())
        jobs.run_now(parked[11].pk)
        parked[11].refresh_from_db()
        assert (parked[11].status, parked[11].attempts) == (Job.Status.PENDING, 1)
        assert "circuit breaker is open" in parked[11].last_error
        assert parked[11].run_after >= timezone.now() + timedelta(seconds=890)
        assert Lead.objects.count() == 3 and Job.objects.filter(kind=LEAD_CREATED).count() == 3

    # The database is back; fifteen minutes later the breaker lets a trial write through.
    CacheCircuitStorage(LEAD_WRITE_BREAKER).opened_at = datetime.now(UTC) - timedelta(minutes=16)
    assert run_jobs(LEAD_RETRY_KIND) == 8
    assert set(Job.objects.filter(kind=LEAD_RETRY_KIND).values_list("status", flat=True)) == {"succeeded"}
    assert lead_write_breaker().current_state == pybreaker.STATE_CLOSED

    assert Lead.objects.count() == 11
    happy, retried = Lead.objects.get(first_name="Lead1"), Lead.objects.get(first_name="Lead9")
    for lead in (happy, retried):
        event = Job.objects.get(kind=LEAD_CREATED, payload__lead_id=lead.pk)
        assert (event.key, event.payload, event.max_attempts) == (f"{LEAD_CREATED}:{lead.pk}", {"lead_id": lead.pk}, 8)
    assert (retried.processed_by, retried.parse_state, retried.store_id) == ("imap-poller", "parsed", happy.store_id)

    assert run_jobs(LEAD_CREATED) == 11
    assert Contact.objects.count() == Task.objects.count() == TimelineEvent.objects.count() == 11


def test_when_parking_fails_too_the_message_stays_unseen_for_the_next_poll(mailbox, make_store):
    make_store()
    mailbox.deliver(lead_message(first="A", phone=phone(1)), lead_message(first="B", phone=phone(2)))

    with failing_writes("leadgen_lead", "TRUE"), failing_writes("jobs_job", f"NEW.kind = '{LEAD_RETRY_KIND}'"):
        result = poll()
    assert (result.captured, result.parked, result.left_unseen) == (0, 0, 2)
    assert set(seen_flags(mailbox.server, mailbox.username, mailbox.password).values()) == {False}
    assert not Lead.objects.exists() and not Job.objects.filter(kind=LEAD_RETRY_KIND).exists()

    result = poll()
    assert (result.found, result.captured) == (2, 2)
    assert set(seen_flags(mailbox.server, mailbox.username, mailbox.password).values()) == {True}
    assert Lead.objects.count() == 2


def test_a_permanently_failing_lead_is_dead_lettered_alerted_and_replayable(mailbox, make_store, settings):
    settings.OPS_ALERT_EMAILS = ["ops@example.com"]
    make_store()
    mailbox.deliver(
        lead_message(first="Good", phone=phone(1)),
        lead_message(first="Poison", last="Pill", phone=phone(2), sender="poison@x.example"),
    )
    with failing_writes("leadgen_lead", "NEW.email_from = 'poison@x.example'"):
        assert poll().parked == 1
        for _ in range(3):
            run_jobs(LEAD_RETRY_KIND)
        retry = Job.objects.get(kind=LEAD_RETRY_KIND)
        assert (retry.status, retry.attempts) == (Job.Status.DEAD, 3)
        assert retry.last_error == (
            "gave up after 3 attempts; transient: lead write failed: OperationalError (SQLSTATE 55P03)"
        )
        assert list(retry.attempt_log.values_list("outcome", flat=True)) == ["retry", "retry", "failed"]

        assert run_jobs("jobs.dead_alert") == 1
        [alert] = mail.outbox
        assert f"tracking.lead_retry #{retry.pk}" in alert.subject
        for personal in ("Poison", "5550002", "poison@"):
            assert personal not in alert.subject + alert.body, "the alert carries no personal data"
        assert not Lead.objects.filter(first_name="Poison").exists()

    assert jobs.replay(job_ids=[retry.pk], actor="ops") == 1
    run_jobs(LEAD_RETRY_KIND)
    lead = Lead.objects.get(first_name="Poison")
    assert Job.objects.filter(kind=LEAD_CREATED, key=f"{LEAD_CREATED}:{lead.pk}").exists()


def test_concurrent_captures_of_one_message_leave_one_lead(make_store):
    make_store()
    parsed = parse_lead_email(lead_message(), received_at=datetime(2026, 3, 16, 18, 5, tzinfo=UTC))
    _, errors = at_once(lambda: email_lead_capture(parsed=parsed))
    assert errors == []
    assert Lead.objects.count() == 1
    assert Job.objects.filter(kind=LEAD_CREATED).count() == 1
