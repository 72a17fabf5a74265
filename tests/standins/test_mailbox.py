"""The mailbox stand-in: a real dovecot, the notifier's emails in it, and the product's own poller reading them."""

import io
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from django.core.management import call_command

from integrations.imap.client import ImapClient, MailboxSettings
from leadgen.models import Lead
from standins.mailbox import Mailbox
from standins.notifier import DEMO_TRACKING_ID, FORMATS, Notifier
from stores.models import Store
from tests.tracking.conftest import fresh_tracking_state  # noqa: F401
from tracking.parsing import parse_lead_email
from tracking.selectors import mailbox_settings
from tracking.services import mailbox_poll

ROOT = Path(__file__).resolve().parents[2]


def wait_for(condition, timeout=20.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def use(settings, env: dict[str, str]) -> None:
    """The stand-in's settings() as config/settings.py reads them from the environment."""
    settings.IMAP_HOST, settings.IMAP_PORT = env["IMAP_HOST"], int(env["IMAP_PORT"])
    settings.IMAP_SSL = env["IMAP_SSL"] == "true"
    settings.IMAP_USER, settings.IMAP_PASSWORD = env["IMAP_USER"], env["IMAP_PASSWORD"]
    settings.IMAP_FOLDER, settings.IMAP_CA_FILE = env["IMAP_FOLDER"], env["IMAP_CA_FILE"]


def read(lead) -> dict[str, str]:
    return {"lead_type": lead.lead_type, "first_name": lead.first_name, "last_name": lead.last_name,
            "email": lead.email, "phone": lead.phone,
            "booked_date": lead.booked_date.isoformat() if lead.booked_date else "",
            "booked_time": lead.booked_time.isoformat() if lead.booked_time else ""}  # fmt: skip


def unseen(env: dict[str, str]) -> list[int]:
    """The product's IMAP client, as the poller connects: implicit TLS checked against IMAP_CA_FILE."""
    account = MailboxSettings(name="env", host=env["IMAP_HOST"], port=int(env["IMAP_PORT"]),
                              username=env["IMAP_USER"], password=env["IMAP_PASSWORD"])  # fmt: skip
    with ImapClient(account, timeout=10, ca_file=env["IMAP_CA_FILE"]) as client:
        return client.search()


def test_every_notification_reads_as_the_lead_it_announces():
    notifier = Notifier(lambda notification: None, seed=7)
    notifications = [notifier.next() for _ in range(10 * len(FORMATS))]

    for notification in notifications:
        parsed = parse_lead_email(notification.message.as_bytes())
        assert not parsed.parse_error, notification.kind
        assert parsed.tracking_id == DEMO_TRACKING_ID
        found = {name: getattr(parsed, name) for name in notification.lead}
        found["booked_date"] = found["booked_date"].isoformat() if found["booked_date"] else ""
        found["booked_time"] = found["booked_time"].isoformat() if found["booked_time"] else ""
        assert found == notification.lead, notification.kind
    assert len({n.kind for n in notifications}) == len(FORMATS)
    assert len({n.lead["phone"] for n in notifications}) == len(notifications), "each one its own lead"


@pytest.mark.django_db
def test_the_notifier_drops_lead_emails_the_poller_turns_into_the_demo_stores_leads(settings):
    call_command("load_demo", stdout=io.StringIO())
    store = Store.objects.get(tracking_id=DEMO_TRACKING_ID)

    before = Lead.objects.order_by("-pk").values_list("pk", flat=True).first() or 0  # the demo office's own
    with Mailbox(interval=0.2) as mailbox:
        use(settings, mailbox.settings())
        wait_for(lambda: len(mailbox.received()) >= len(FORMATS))
        result = mailbox_poll(mailbox=mailbox_settings("env"))
    received = {item.detail["lead"]["phone"]: item for item in mailbox.received()}

    assert result.found >= len(FORMATS) and result.captured == result.found
    assert (result.failed_parse, result.parked, result.left_unseen) == (0, 0, 0)
    leads = Lead.objects.filter(channel=Lead.Channel.EMAIL, pk__gt=before)
    assert leads.count() == result.found
    for lead in leads:
        item = received[lead.phone]
        assert read(lead) == item.detail["lead"], item.detail["format"]
        assert (lead.store, lead.parse_state, lead.tracking_id) == (store, "parsed", DEMO_TRACKING_ID)
        assert lead.email_subject == item.title and item.kind == "email" and item.service == "mailbox"
        assert item.detail["to"] == f"lead-tracking+{DEMO_TRACKING_ID}@leads.example.org"
        assert item.body or item.html
    assert len({received[lead.phone].detail["format"] for lead in leads}) == len(FORMATS), "every format"


def test_alone_it_prints_its_settings_serves_until_interrupted_and_keeps_its_mail():
    with tempfile.TemporaryDirectory(prefix="mailbox-") as directory:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        command = [sys.executable, "-m", "standins.mailbox", "--dir", directory, "--port", str(port),
                   "--interval", "0.2"]  # fmt: skip
        process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            env = dict(process.stdout.readline().rstrip("\n").split("=", 1) for _ in range(7))
            assert env["IMAP_PORT"] == str(port) and env["IMAP_SSL"] == "true"
            assert env["IMAP_CA_FILE"] == str(Path(directory).resolve() / "cert.pem")
            wait_for(lambda: len(unseen(env)) >= 2)
        finally:
            process.send_signal(signal.SIGINT)
            # dovecot is given 10 s to stop before it is killed (and 10 more): a loaded host needs all of it.
            stderr = process.communicate(timeout=60)[1]
        assert process.returncode == 0, stderr
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=1).close()

        with Mailbox(directory, port=port, interval=None) as again:
            kept = unseen(again.settings())
            assert len(kept) >= 2, "the mail of the first run is still there"
            assert again.notifier.number == len(kept), "the numbering (and so the phones) go on from there"
        assert (Path(directory) / "dovecot.conf").exists(), "a given directory is kept"
