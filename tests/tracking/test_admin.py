"""Operations and sales staff in the tracking admin: mailboxes, stores, email leads with parse state."""

from datetime import UTC, datetime

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse
from pytest_django.asserts import assertContains, assertNotContains

from foundation.staff_groups import MANAGERS, OPERATIONS, SALES
from standins.lead_emails import lead_message
from tracking.models import Mailbox
from tracking.parsing import parse_lead_email
from tracking.services import email_lead_capture

pytestmark = pytest.mark.django_db


@pytest.fixture
def login(client, django_user_model):
    def as_member(group_name):
        user = django_user_model.objects.create_user(f"user-{group_name}", is_staff=True)
        user.groups.add(Group.objects.get(name=group_name), Group.objects.get(name=MANAGERS))
        client.force_login(user)
        return client

    return as_member


def group_perms(name: str, app_label: str) -> set[str]:
    permissions = Group.objects.get(name=name).permissions.filter(content_type__app_label=app_label)
    return set(permissions.values_list("codename", flat=True))


def test_migrations_grant_mailboxes_to_operations_and_email_leads_to_both():
    assert {"view_mailbox", "add_mailbox", "change_mailbox", "delete_mailbox", "view_emaillead"} <= group_perms(
        OPERATIONS, "tracking"
    )
    assert group_perms(SALES, "tracking") == {"view_emaillead"}
    assert group_perms(SALES, "stores") == {"view_store"}  # the store moved to its own app, grants with it


def mailbox_form(**overrides):
    form = {
        "name": "sales-inbox", "host": "imap.example.com", "port": "993", "use_ssl": "on", "username": "leads",
        "password_env_var": "IMAP_PASSWORD_SALES", "folder": "INBOX", "is_active": "on",
    }  # fmt: skip
    return {**form, **overrides}


@pytest.fixture
def superuser_client(client, django_user_model, settings):
    settings.IMAP_ALLOWED_HOSTS = ["imap.example.com"]
    client.force_login(django_user_model.objects.create_superuser("root", "root@example.com", "pw"))
    return client


def test_a_superuser_adds_a_mailbox_whose_password_stays_in_the_environment(superuser_client):
    client = superuser_client
    response = client.post(reverse("admin:tracking_mailbox_add"), mailbox_form())
    assert response.status_code == 302
    mailbox = Mailbox.objects.get()
    assert (mailbox.name, mailbox.password_env_var) == ("sales-inbox", "IMAP_PASSWORD_SALES")
    assert not any(field.name == "password" for field in Mailbox._meta.fields), "no password column"
    assertContains(client.get(reverse("admin:tracking_mailbox_changelist")), "sales-inbox")


@pytest.mark.parametrize(
    ("overrides", "field", "message"),
    [
        ({"name": "env"}, "name", "configured by the IMAP_* environment variables"),
        ({"password_env_var": "imap password"}, "password_env_var", "Use an environment variable name"),
    ],
)
def test_mailbox_form_errors(superuser_client, overrides, field, message):
    response = superuser_client.post(reverse("admin:tracking_mailbox_add"), mailbox_form(**overrides))
    assert response.status_code == 200
    assert message in str(response.context["adminform"].form.errors[field])


def test_sales_sees_email_leads_with_their_parse_state_but_no_mailboxes(login, make_store):
    make_store()
    arrived = datetime(2026, 3, 16, 18, 5, tzinfo=UTC)
    email_lead_capture(parsed=parse_lead_email(lead_message(first="Jane"), received_at=arrived))
    newsletter = b"From: news@x.example\nSubject: News\nDate: Mon, 16 Mar 2026 18:00:00 +0000\n\nNothing to see."
    failed = email_lead_capture(parsed=parse_lead_email(newsletter, received_at=arrived))
    client = login(SALES)

    listing = client.get(reverse("admin:tracking_emaillead_changelist"))
    assertContains(listing, 'class="parse-failed"')
    assertContains(listing, 'class="parse-parsed"')
    assert {spec.title for spec in listing.context["cl"].filter_specs} >= {"parse state", "lead type", "store"}
    only_failed = client.get(reverse("admin:tracking_emaillead_changelist") + "?parse_state__exact=failed")
    assert list(only_failed.context["cl"].result_list) == [failed]

    detail = client.get(reverse("admin:tracking_emaillead_change", args=[failed.pk]))
    assertContains(detail, "no lead details found")
    assertContains(detail, "Nothing to see.")
    assertNotContains(detail, 'name="_save"')
    assert client.get(reverse("admin:tracking_mailbox_changelist")).status_code == 403


def test_email_leads_are_only_the_email_channel(login):
    from leadgen.models import Lead

    Lead.objects.create(first_name="Web", email="web@example.com")
    listing = login(OPERATIONS).get(reverse("admin:tracking_emaillead_changelist"))
    assert list(listing.context["cl"].result_list) == []
