"""Polling a real dovecot IMAP server over TLS: leads, contacts, tasks, timeline; \\Seen after capture."""

import logging
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import CommandError, call_command

from crm.intake import LEAD_CREATED
from crm.models import Contact, Task, TimelineEvent
from jobs import PermanentError, TransientError
from jobs.models import Job
from leadgen.models import Lead
from standins.lead_emails import lead_message
from tests.tracking.support import run_jobs, seen_flags
from tracking import tasks
from tracking.models import Mailbox
from tracking.selectors import mailbox_settings
from tracking.services import POLL_KIND, mailbox_poll

pytestmark = pytest.mark.django_db

# 11:05 in Los Angeles: outside the store's quiet hours, so tasks are due 5 minutes later.
ARRIVED = datetime(2026, 3, 16, 18, 5, 9, tzinfo=UTC)


def poll(**kwargs):
    return mailbox_poll(mailbox=mailbox_settings("env"), **kwargs)


def newsletter() -> bytes:
    return (
        b"From: news@otf-mail.example.com\r\nTo: lead-tracking+ST0421@leads.example.org\r\n"
        b"Subject: March newsletter\r\n\r\nThree new classes this month. Thanks, team!\r\n"
    )


def test_polling_creates_leads_contacts_tasks_and_timeline_events(mailbox, make_store):
    store = make_store()
    mailbox.deliver(
        lead_message(first="Jane", last="Doe", phone="(415) 555-0132", email="jane@example.com"),
        lead_message(first="Sam", last="Lee", phone="415.555.0177", lead_type="Online Intro", html=True),
        newsletter(),
        received_at=ARRIVED,
    )
    assert set(seen_flags(mailbox.server, mailbox.username, mailbox.password).values()) == {False}

    result = poll()

    assert (result.found, result.captured, result.failed_parse, result.parked) == (3, 3, 1, 0)
    assert seen_flags(mailbox.server, mailbox.username, mailbox.password) == {1: True, 2: True, 3: True}
    leads = {lead.first_name: lead for lead in Lead.objects.filter(channel="email")}
    assert set(leads) == {"Jane", "Sam", ""}
    jane = leads["Jane"]
    assert (jane.phone, jane.lead_type, jane.email, jane.store, jane.franchise, jane.account_id) == (
        "+14155550132", "Web Lead", "jane@example.com", store, "OrangeTheory", "acct-0421",
    )  # fmt: skip
    assert jane.received_at == ARRIVED and jane.synced_at is not None
    assert jane.dedup_key == "studio0421@otf-mail.example.com#+14155550132#2026-03-16"
    assert (jane.parse_state, jane.processed_by, jane.tracking_id) == ("parsed", "imap-poller", "ST0421")
    failed = leads[""]
    assert failed.parse_state == "failed" and failed.parse_error.startswith("no lead details found")
    assert "Three new classes" in failed.raw_body

    lead_created = Job.objects.filter(kind=LEAD_CREATED)
    assert sorted(lead_created.values_list("key", flat=True)) == sorted(
        f"{LEAD_CREATED}:{leads[name].pk}" for name in ("Jane", "Sam")
    ), "the failed parse emits nothing"
    assert run_jobs(LEAD_CREATED) == 2

    contact = Contact.objects.get(phone="+14155550132", store=store)
    assert (contact.lifecycle_stage, contact.lead_status, contact.first_name, contact.last_name) == (
        "lead", "new", "Jane", "Doe",
    )  # fmt: skip
    assert contact.last_activity_at == ARRIVED
    task = Task.objects.get(source_lead=jane)
    assert (task.contact, task.priority, task.status, task.task_type) == (contact, "high", "pending", "lead_outreach")
    assert task.due_at == ARRIVED + timedelta(minutes=5)
    assert task.action_needed_reason == "New Web Lead from Jane Doe"
    assert task.suggested_actions[0]["action"] == "call"
    event = TimelineEvent.objects.get(contact=contact)
    assert (event.event_type, event.occurred_at, event.idempotency_key) == (
        "lead.created", ARRIVED, f"lead.created:{jane.pk}",
    )  # fmt: skip
    assert event.new_value == {"channel": "email", "leadType": "Web Lead", "firstName": "Jane", "lastName": "Doe"}

    second = poll()
    assert (second.found, second.captured) == (0, 0), "a second poll finds nothing new"
    assert Lead.objects.count() == 3 and Job.objects.filter(kind=LEAD_CREATED).count() == 2
    assert (Contact.objects.count(), Task.objects.count(), TimelineEvent.objects.count()) == (2, 2, 2)


def test_rescanning_seen_messages_is_idempotent(mailbox, make_store):
    make_store()
    mailbox.deliver(lead_message(), lead_message(first="Sam", phone="415.555.0177"), received_at=ARRIVED)
    poll()
    synced = dict(Lead.objects.values_list("pk", "synced_at"))

    call_command("poll_mailbox", "--include-seen")
    call_command("poll_mailbox", "--mailbox", "env", "--include-seen")

    assert Lead.objects.count() == 2
    assert all(lead.synced_at > synced[lead.pk] for lead in Lead.objects.all()), "synced-at is bumped"
    assert Job.objects.filter(kind=LEAD_CREATED).count() == 2, "LeadCreated is not emitted twice"


def test_since_limits_a_backfill_to_recent_messages(mailbox, make_store, capsys):
    make_store()
    mailbox.deliver(lead_message(first="Old", phone="415.555.0101"), received_at=datetime(2026, 3, 1, 12, tzinfo=UTC))
    mailbox.deliver(lead_message(first="New", phone="415.555.0102"), received_at=datetime(2026, 3, 20, 12, tzinfo=UTC))

    call_command("poll_mailbox", "--since", "2026-03-10", "--include-seen")

    assert list(Lead.objects.values_list("first_name", flat=True)) == ["New"]
    assert "env: 1 found, 1 captured (0 failed to parse), 0 parked for retry, 0 left unseen" in capsys.readouterr().out


def test_a_lead_without_a_store_joins_the_shared_pool(mailbox, caplog):
    caplog.set_level(logging.INFO)
    mailbox.deliver(
        lead_message(first="Jane", last="Doe", phone="(415) 555-0132", tracking_id="NOPE"), received_at=ARRIVED
    )

    poll()

    lead = Lead.objects.get()
    assert lead.parse_state == "parsed" and lead.store is None and lead.phone == "+14155550132"
    assert run_jobs(LEAD_CREATED) == 1
    contact = Contact.objects.get()
    assert (contact.phone, contact.store, contact.first_name) == ("+14155550132", None, "Jane")
    task = Task.objects.get()
    assert (task.source_lead, task.contact, task.store) == (lead, contact, None)
    assert task.due_at == ARRIVED + timedelta(minutes=5), "the shared pool's quiet hours (New York) are over"
    for personal in ("5550132", "Jane", "Doe", "studio0421", "otf-mail"):
        assert personal not in caplog.text, "no personal data in logs"


def test_a_lead_without_a_phone_joins_the_contact_of_its_email(mailbox, make_store):
    store = make_store()
    mailbox.deliver(lead_message(first="Pat", phone="", email="Pat@Example.com"), received_at=ARRIVED)

    poll()

    lead = Lead.objects.get()
    assert lead.dedup_key == "studio0421@otf-mail.example.com#2026-03-16T18:05:09Z"
    assert run_jobs(LEAD_CREATED) == 1
    contact = Contact.objects.get()
    assert (contact.email, contact.phone, contact.store, contact.first_name) == ("pat@example.com", "", store, "Pat")
    assert Task.objects.get().source_lead == lead


def test_a_lead_without_a_phone_or_an_email_is_saved_without_leadcreated(mailbox, make_store, caplog):
    caplog.set_level(logging.INFO)
    make_store()
    mailbox.deliver(lead_message(first="Pat", phone=""), received_at=ARRIVED)

    poll()

    lead = Lead.objects.get()
    assert lead.parse_state == "parsed" and lead.first_name == "Pat"
    assert not Job.objects.filter(kind=LEAD_CREATED).exists()
    assert any(isinstance(r.msg, dict) and r.msg.get("missing") == ["phone or email"] for r in caplog.records)


def test_messages_are_read_in_uid_batches_within_a_time_budget(mailbox, make_store, settings):
    make_store()
    settings.IMAP_FETCH_BATCH = 40
    mailbox.deliver(*[lead_message(first=f"Lead{n}", phone=f"415555{n:04d}") for n in range(100)])

    assert poll(time_budget=0).budget_exhausted, "the budget is checked before each batch"
    assert set(seen_flags(mailbox.server, mailbox.username, mailbox.password).values()) == {False}

    result = poll(time_budget=60)
    assert (result.found, result.captured, result.budget_exhausted) == (100, 100, False)
    assert Lead.objects.count() == 100
    assert set(seen_flags(mailbox.server, mailbox.username, mailbox.password).values()) == {True}


def test_an_admin_mailbox_over_starttls_takes_its_password_from_the_named_variable(
    dovecot, make_store, monkeypatch, settings
):
    make_store()
    username, password = dovecot.add_user()
    dovecot.deliver(username, [lead_message()])
    settings.IMAP_CA_FILE = str(dovecot.ca_file)
    settings.IMAP_ALLOWED_HOSTS = [f"{dovecot.host}:{dovecot.starttls_port}"]
    Mailbox.objects.create(
        name="sales", host=dovecot.host, port=dovecot.starttls_port, use_ssl=False, username=username,
        password_env_var="IMAP_PASSWORD_SALES_TEST",
    )  # fmt: skip

    with pytest.raises(LookupError, match="IMAP_PASSWORD_SALES_TEST is not set"):
        mailbox_settings("sales")
    with pytest.raises(CommandError, match="1 mailbox"):
        call_command("poll_mailbox", "--mailbox", "sales")

    monkeypatch.setenv("IMAP_PASSWORD_SALES_TEST", password)
    result = mailbox_poll(mailbox=mailbox_settings("sales"))
    assert result.captured == 1 and Lead.objects.get().phone == "+14155550132"


def test_connection_failures_are_transient_and_configuration_errors_permanent(mailbox, settings):
    settings.IMAP_PASSWORD = "wrong"
    with pytest.raises(PermanentError, match="login refused"):
        poll()
    settings.IMAP_PASSWORD = mailbox.password
    settings.IMAP_CA_FILE = ""  # the system's trust store does not know the test certificate
    with pytest.raises(PermanentError, match="certificate is not trusted"):
        poll()
    settings.IMAP_CA_FILE = str(mailbox.server.ca_file)
    settings.IMAP_FOLDER = "Missing"
    with pytest.raises(PermanentError, match="cannot select folder"):
        poll()
    settings.IMAP_PORT = 1  # nothing listens there
    with pytest.raises(TransientError, match="cannot connect"):
        poll()


def test_beat_enqueues_one_poll_job_per_mailbox_and_never_doubles_one(mailbox, make_store, monkeypatch, settings):
    make_store()
    settings.IMAP_ALLOWED_HOSTS = ["127.0.0.1"]
    mailbox.deliver(lead_message())
    Mailbox.objects.create(name="idle", host="127.0.0.1", username="x", password_env_var="IMAP_PASSWORD_IDLE_TEST")
    Mailbox.objects.create(
        name="off", host="127.0.0.1", username="x", password_env_var="IMAP_PASSWORD_X", is_active=False
    )

    first = tasks.poll_mailboxes()
    assert sorted(Job.objects.filter(pk__in=first).values_list("payload__mailbox", flat=True)) == ["env", "idle"]
    assert tasks.poll_mailboxes() == [], "a pending poll is not doubled"

    run_jobs(POLL_KIND)
    env_job, idle_job = (Job.objects.get(pk=pk) for pk in sorted(first))
    assert env_job.status == Job.Status.SUCCEEDED and Lead.objects.count() == 1
    assert idle_job.status == Job.Status.DEAD and "IMAP_PASSWORD_IDLE_TEST is not set" in idle_job.last_error

    again = tasks.poll_mailboxes()
    assert len(again) == 2, "the next beat polls again"
