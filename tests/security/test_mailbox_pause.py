"""A model rule about a field an editor may not change shows as a form error, never a server error."""

import pytest
from django.urls import reverse

from foundation.staff_groups import OPERATIONS
from tracking.models import Mailbox

pytestmark = pytest.mark.django_db


@pytest.fixture
def mailbox_off_the_allowlist(settings):
    """A mailbox whose host was allowed when a superuser added it, and no longer is."""
    settings.IMAP_ALLOWED_HOSTS = ["imap.example.com"]
    mailbox = Mailbox.objects.create(name="sales", host="imap.example.com", username="leads",
                                     password_env_var="IMAP_PASSWORD_SALES")  # fmt: skip
    settings.IMAP_ALLOWED_HOSTS = ["imap.other.example.com"]
    return mailbox


def test_operations_pausing_a_mailbox_whose_host_is_no_longer_allowed_sees_why(
    client, staff_user, mailbox_off_the_allowlist
):
    mailbox = mailbox_off_the_allowlist
    client.force_login(staff_user("ops", OPERATIONS))
    change_url = reverse("admin:tracking_mailbox_change", args=[mailbox.pk])
    page = client.get(change_url)
    assert page.status_code == 200 and 'name="host"' not in page.content.decode()

    # is_active left out: the checkbox unticked.
    response = client.post(change_url, {"name": "sales", "folder": "INBOX"})

    assert response.status_code == 200
    form = response.context["adminform"].form
    assert "imap.example.com:993 is not in IMAP_ALLOWED_HOSTS" in " ".join(form.non_field_errors())
    assert "Host: imap.example.com:993 is not in IMAP_ALLOWED_HOSTS." in response.content.decode()
    mailbox.refresh_from_db()
    assert mailbox.is_active  # nothing was saved


def test_operations_still_pause_a_mailbox_whose_host_is_allowed(client, staff_user, settings):
    settings.IMAP_ALLOWED_HOSTS = ["imap.example.com"]
    mailbox = Mailbox.objects.create(name="sales", host="imap.example.com", username="leads",
                                     password_env_var="IMAP_PASSWORD_SALES")  # fmt: skip
    client.force_login(staff_user("ops", OPERATIONS))

    response = client.post(reverse("admin:tracking_mailbox_change", args=[mailbox.pk]),
                           {"name": "sales", "folder": "INBOX"})  # fmt: skip

    assert response.status_code == 302
    mailbox.refresh_from_db()
    assert not mailbox.is_active


def test_a_superuser_sees_the_same_rule_on_the_host_field(client, django_user_model, mailbox_off_the_allowlist):
    mailbox = mailbox_off_the_allowlist
    client.force_login(django_user_model.objects.create_superuser("root", "root@example.com", "pw"))

    response = client.post(
        reverse("admin:tracking_mailbox_change", args=[mailbox.pk]),
        {"name": "sales", "host": "imap.example.com", "port": "993", "use_ssl": "on", "username": "leads",
         "password_env_var": "IMAP_PASSWORD_SALES", "folder": "INBOX"},
    )  # fmt: skip

    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert errors["host"] == ["imap.example.com:993 is not in IMAP_ALLOWED_HOSTS."]
