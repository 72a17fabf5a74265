"""The whole path on real processes: beat schedules the poll, a Celery worker polls dovecot and
processes LeadCreated, contacts/tasks/timeline appear and every message ends \\Seen."""

import os
import signal
import subprocess
import sys
import time
import uuid

import pytest
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from crm.models import Contact, Task, TimelineEvent
from jobs.models import Job
from standins.lead_emails import lead_message
from tests.conftest import subprocess_env
from tests.tracking.support import seen_flags

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.usefixtures("empty_broker")]

CELERY = [sys.executable, "-m", "celery", "-A", "config"]


def test_beat_and_a_worker_take_mail_to_contacts_tasks_and_timeline(mailbox, make_store, tmp_path):
    make_store()
    mailbox.deliver(*[lead_message(first=f"Lead{n}", phone=f"(415) 555-01{n:02d}") for n in range(5)])
    every_second, _ = IntervalSchedule.objects.get_or_create(every=1, period=IntervalSchedule.SECONDS)
    for name, task in (("tracking: poll lead mailboxes", "tracking.poll_mailboxes"), ("jobs: sweep", "jobs.sweep")):
        PeriodicTask.objects.update_or_create(name=name, defaults={"task": task, "interval": every_second})

    env = subprocess_env(
        IMAP_HOST=mailbox.server.host, IMAP_PORT=mailbox.server.imaps_port, IMAP_USER=mailbox.username,
        IMAP_PASSWORD=mailbox.password, IMAP_CA_FILE=mailbox.server.ca_file, LOG_LEVEL="WARNING",
    )  # fmt: skip
    processes = [
        subprocess.Popen(
            [*CELERY, "worker", "-P", "solo", "-n", f"w{uuid.uuid4().hex[:8]}@%h", "--without-heartbeat",
             "--without-gossip", "--without-mingle", "--loglevel", "WARNING"],
            env=env, start_new_session=True,
        ),
        subprocess.Popen(
            [*CELERY, "beat", "--scheduler", "django_celery_beat.schedulers:DatabaseScheduler", "--pidfile=",
             "-s", str(tmp_path / "beat"), "--loglevel", "WARNING"],
            env=env, start_new_session=True,
        ),
    ]  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while TimelineEvent.objects.count() < 5 and time.monotonic() < deadline:
            time.sleep(0.5)
    finally:
        for process in processes:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)

    assert (Contact.objects.count(), Task.objects.count(), TimelineEvent.objects.count()) == (5, 5, 5)
    assert set(seen_flags(mailbox.server, mailbox.username, mailbox.password).values()) == {True}
    assert Job.objects.filter(kind="tracking.poll_mailbox", status="succeeded").exists()
    assert not Job.objects.filter(status="dead").exists()
