"""Sales staff see tracked users and the payload the CRM got and would get; operations deliver a user now."""

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from docs_users import activity
from docs_users.models import TrackedUser
from docs_users.sync import DELIVER_KIND
from foundation.staff_groups import MANAGERS, OPERATIONS, SALES
from jobs.models import Job
from tests.browser import admin_login


@pytest.fixture
def ada(db):
    activity.tracked_user_sign_in(sub="auth0|ada", channel="docs-login", email="ada@acme.com", given_name="Ada")
    activity.mcp_tool_call_record(sub="auth0|ada", tool="search_docs", context="mail me at ada.l@bank.example")
    return TrackedUser.objects.get(sub="auth0|ada")


def test_migrations_let_managers_view_tracked_users_but_nobody_edit_them(staff_user):
    assert not staff_user("sales", SALES).has_perm("docs_users.view_trackeduser")
    assert not staff_user("ops", OPERATIONS).has_perm("docs_users.view_trackeduser")
    manager = staff_user("boss", SALES, OPERATIONS, MANAGERS)
    assert manager.has_perm("docs_users.view_trackeduser")
    assert not manager.has_perm("docs_users.change_trackeduser")
    assert not manager.has_perm("docs_users.delete_trackeduser")


def test_the_detail_previews_the_next_payload_redacted(client, staff_user, ada):
    client.force_login(staff_user("sales", SALES, MANAGERS))
    TrackedUser.objects.filter(pk=ada.pk).update(last_delivered_at=timezone.now())
    page = client.get(f"/admin/docs_users/trackeduser/{ada.pk}/change/").content.decode()
    assert "mail me at [EMAIL]" in page  # the next payload, redacted
    assert "never delivered" in page


@pytest.mark.browser
def test_operations_deliver_a_user_now_from_the_list(browser_page, staff_user, ada):
    staff_user("ops", OPERATIONS, MANAGERS)
    page = browser_page
    admin_login(page, "ops")
    page.locator("tr.model-trackeduser").get_by_role("link", name="Tracked users").click()
    row = page.locator("#result_list tbody tr")
    expect(row).to_have_count(1)
    expect(row).to_contain_text("ada@acme.com")
    row.locator('input[name="_selected_action"]').check()
    page.locator('select[name="action"]').select_option(label="Deliver to the CRM now")
    page.get_by_role("button", name="Go").click()
    expect(page.locator("ul.messagelist li.success")).to_have_text("Queued 1 profile delivery.")
    assert Job.objects.filter(kind=DELIVER_KIND, payload={"user_id": ada.pk}).count() == 1
    assert not TrackedUser.objects.get(pk=ada.pk).is_pending
