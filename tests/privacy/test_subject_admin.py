"""The admin page of data-subject requests: who may use it, the preview, the export download, the erasure."""

import json

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from leadgen.models import Lead
from privacy.models import SubjectRequest
from tests.privacy.test_subject_requests import columns_holding

pytestmark = pytest.mark.django_db

PAGE = reverse("admin:privacy_subjectrequest_request")


def allowed(user, *codenames):
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    return user


def test_a_superuser_previews_exports_and_erases(admin_client, zephyrine, barnaby):
    assert b'id="subject-request"' in admin_client.get(reverse("admin:privacy_subjectrequest_changelist")).content
    assert admin_client.get(PAGE).status_code == 200

    preview = admin_client.post(PAGE, {"email": zephyrine.email.upper(), "action": "preview"})
    page = preview.content.decode()
    assert "<td>crm_contact</td><td>1</td>" in page and "<td>crm_timelineevent</td><td>2</td>" in page
    assert f"Found through {zephyrine.email}, {zephyrine.phone}." in page
    assert "V0 prototype chat: v0-" in page and barnaby.email not in page
    assert not SubjectRequest.objects.exists(), "a preview is a look, not a request"

    download = admin_client.post(PAGE, {"email": zephyrine.email, "phone": "", "action": "export"})
    export = SubjectRequest.objects.get()
    assert download["Content-Disposition"] == f'attachment; filename="subject-request-{export.pk}.json"'
    document = json.loads(download.content)
    assert {row["id"] for row in document["rows"]["leadgen_lead"]} == zephyrine.rows["leadgen_lead"]
    assert (export.kind, export.actor) == ("export", "admin")

    erased = admin_client.post(PAGE, {"email": zephyrine.email, "phone": "", "action": "erase", "confirmed": "yes"})
    erase = SubjectRequest.objects.get(kind="erase")
    page = erased.content.decode()
    assert f"Erased: subject request #{erase.pk}" in page and "<td>crm_contact</td><td>1</td>" in page
    assert "Auth0 user: auth0|" in page
    assert columns_holding(zephyrine.email) == [] and columns_holding(zephyrine.last_name) == []
    assert Lead.objects.filter(email=barnaby.email).exists()


def test_erasing_takes_the_confirmation_of_the_preview_page(admin_client, zephyrine):
    admin_client.post(PAGE, {"email": zephyrine.email, "action": "erase"})
    assert not SubjectRequest.objects.exists() and columns_holding(zephyrine.email)


def test_a_request_without_a_usable_email_or_phone_is_refused_next_to_its_field(admin_client):
    page = admin_client.post(PAGE, {"email": "", "phone": "12", "action": "export"}).content.decode()
    assert "Enter a phone number" in page
    page = admin_client.post(PAGE, {"email": "", "phone": "", "action": "export"}).content.decode()
    assert "Give an email, a phone, or both." in page
    assert not SubjectRequest.objects.exists()


@pytest.mark.parametrize(
    "groups, codenames, status",
    [
        (["Managers"], ["view_subjectrequest"], 403),  # sees every store, may not ask
        (["Sales"], ["add_subjectrequest", "view_subjectrequest"], 403),  # may ask, sees one store's rows only
        ([], ["add_subjectrequest", "view_subjectrequest", "view_all_stores"], 200),
    ],
)
def test_a_request_takes_its_permission_and_every_store(client, staff_user, zephyrine, groups, codenames, status):
    user = allowed(staff_user("dpo", *groups), *codenames)
    client.force_login(user)
    assert client.get(PAGE).status_code == status
    response = client.post(PAGE, {"email": zephyrine.email, "action": "erase", "confirmed": "yes"})
    assert response.status_code == status
    assert SubjectRequest.objects.exists() == (status == 200)
    listed = client.get(reverse("admin:privacy_subjectrequest_changelist")).content
    assert (b'id="subject-request"' in listed) == (status == 200)
