"""No admin mailbox row can send a server secret, or any password, to a host of its editor's choosing."""

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from foundation.staff_groups import OPERATIONS
from integrations.imap.client import ImapClient, MailboxSettings
from jobs import PermanentError
from jobs.models import Job
from tests.security.fake_imap import FakeImapServer
from tests.tracking.support import run_jobs
from tracking import tasks
from tracking.models import Mailbox
from tracking.services import POLL_KIND

pytestmark = pytest.mark.django_db


@pytest.fixture
def fake_imap(settings):
    with FakeImapServer() as server:
        settings.IMAP_CA_FILE = server.ca_file
        settings.IMAP_HOST = ""  # only admin mailboxes here
        yield server


def poll_all() -> list[Job]:
    ids = tasks.poll_mailboxes()
    run_jobs(POLL_KIND)
    return list(Job.objects.filter(pk__in=ids).order_by("pk"))


def test_a_row_naming_a_server_secret_never_sends_it(fake_imap, monkeypatch, settings):
    monkeypatch.setenv("SECRET_KEY", "the-server-secret")
    monkeypatch.setenv("PIPEDRIVE_API_TOKEN", "the-crm-token")
    settings.IMAP_ALLOWED_HOSTS = [f"{fake_imap.host}:{fake_imap.port}"]
    # Rows as they could be written before these rules (bulk_create skips validation, as a data import would).
    Mailbox.objects.bulk_create([
        Mailbox(name="steal-key", host=fake_imap.host, port=fake_imap.port, username="x",
                password_env_var="SECRET_KEY"),
        Mailbox(name="steal-crm", host=fake_imap.host, port=fake_imap.port, username="x",
                password_env_var="PIPEDRIVE_API_TOKEN"),
    ])  # fmt: skip

    jobs = poll_all()

    assert [job.status for job in jobs] == [Job.Status.DEAD, Job.Status.DEAD]
    assert all("IMAP_PASSWORD_" in job.last_error for job in jobs)
    assert fake_imap.logins == [] and fake_imap.connections == 0
    assert not any("the-server-secret" in line or "the-crm-token" in line for line in fake_imap.lines)


def test_a_mailbox_password_goes_only_to_an_allowed_host(fake_imap, monkeypatch, settings):
    monkeypatch.setenv("IMAP_PASSWORD_SALES", "sales-password")
    Mailbox.objects.bulk_create(
        [Mailbox(name="sales", host=fake_imap.host, port=fake_imap.port, username="leads",
                 password_env_var="IMAP_PASSWORD_SALES")]
    )  # fmt: skip

    settings.IMAP_ALLOWED_HOSTS = ["imap.example.com"]
    (refused,) = poll_all()
    assert refused.status == Job.Status.DEAD and "IMAP_ALLOWED_HOSTS" in refused.last_error
    assert fake_imap.connections == 0

    settings.IMAP_ALLOWED_HOSTS = [f"{fake_imap.host}:{fake_imap.port}"]
    Job.objects.all().delete()  # the next poll's key may fall in the same second
    (allowed,) = poll_all()
    assert allowed.status == Job.Status.DEAD and "login refused" in allowed.last_error  # the fake refuses everyone
    assert len(fake_imap.logins) == 1 and "sales-password" in fake_imap.logins[0]


def test_the_client_checks_the_host_again_when_it_connects(fake_imap):
    mailbox = MailboxSettings(name="m", host=fake_imap.host, port=fake_imap.port, username="u", password="p")
    with pytest.raises(PermanentError, match="not an allowed IMAP host"):
        ImapClient(mailbox, timeout=5, ca_file=fake_imap.ca_file, allowed=frozenset({"imap.example.com"})).connect()
    assert fake_imap.connections == 0


def mailbox_form(**overrides):
    form = {
        "name": "sales-inbox", "host": "imap.example.com", "port": "993", "use_ssl": "on", "username": "leads",
        "password_env_var": "IMAP_PASSWORD_SALES", "folder": "INBOX", "is_active": "on",
    }  # fmt: skip
    return {**form, **overrides}


def test_only_superusers_set_where_a_login_goes(client, django_user_model, settings):
    settings.IMAP_ALLOWED_HOSTS = ["imap.example.com"]
    admin_user = django_user_model.objects.create_superuser("root", "root@example.com", "pw")
    client.force_login(admin_user)
    for overrides, message in [
        ({"password_env_var": "SECRET_KEY"}, "starting with IMAP_PASSWORD_"),
        ({"password_env_var": "DATABASE_URL"}, "starting with IMAP_PASSWORD_"),
        ({"host": "attacker.example.net"}, "not in IMAP_ALLOWED_HOSTS"),
        ({"host": "10.0.0.5"}, "not in IMAP_ALLOWED_HOSTS"),
        ({"port": "22"}, "not in IMAP_ALLOWED_HOSTS"),
    ]:
        response = client.post(reverse("admin:tracking_mailbox_add"), mailbox_form(**overrides))
        assert response.status_code == 200 and message in str(response.context["adminform"].form.errors)
    assert client.post(reverse("admin:tracking_mailbox_add"), mailbox_form()).status_code == 302
    mailbox = Mailbox.objects.get()

    operator = django_user_model.objects.create_user("ops", is_staff=True)
    operator.groups.add(Group.objects.get(name=OPERATIONS))
    client.force_login(operator)
    assert client.get(reverse("admin:tracking_mailbox_add")).status_code == 403
    change_url = reverse("admin:tracking_mailbox_change", args=[mailbox.pk])
    page = client.get(change_url)
    assert page.status_code == 200 and 'name="host"' not in page.content.decode()
    client.post(change_url, mailbox_form(host="attacker.example.net", password_env_var="IMAP_PASSWORD_OTHER",
                                         folder="Leads"))  # fmt: skip
    mailbox.refresh_from_db()
    assert (mailbox.host, mailbox.password_env_var, mailbox.folder) == (
        "imap.example.com", "IMAP_PASSWORD_SALES", "Leads"
    )  # fmt: skip
