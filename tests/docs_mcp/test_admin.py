"""Staff see a tracked user's MCP activity (tools, counts, recent contexts redacted) and the MCP clients seen."""

from pathlib import Path

import pytest
from playwright.sync_api import expect

from docs_users import activity
from docs_users.models import TrackedUser
from foundation.staff_groups import MANAGERS, SALES
from tests.browser import admin_login

SCREENSHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"


@pytest.fixture
def mcp_users(db):
    activity.tracked_user_sign_in(sub="auth0|ada", channel="mcp", email="ada@acme.com", client_name="claude-code")
    for tool in ("search_docs", "search_docs", "ask_docs"):
        activity.mcp_tool_call_record(sub="auth0|ada", tool=tool, client_name="claude-code", context=f"{tool} for TLS")
    activity.mcp_tool_call_record(
        sub="auth0|ada", tool="get_page", client_name="claude-code", context="user ada.l@bank.example asks about ACLs"
    )
    activity.tracked_user_sign_in(sub="auth0|grace", channel="mcp", user_agent="Cursor/1.4 (darwin)")
    activity.mcp_tool_call_record(sub="auth0|grace", tool="search_docs", user_agent="Cursor/1.4 (darwin)")
    activity.tracked_user_sign_in(sub="auth0|alan", channel="mcp", client_name="claude-code")
    return TrackedUser.objects.get(sub="auth0|ada")


def test_the_user_page_shows_tools_counts_and_redacted_contexts(client, staff_user, mcp_users, django_user_model):
    staff_user("sales", SALES, MANAGERS)
    client.force_login(django_user_model.objects.get(username="sales"))
    page = client.get(f"/admin/docs_users/trackeduser/{mcp_users.pk}/change/").content.decode()
    assert "<tr><td>search_docs</td><td>2</td></tr>" in page
    assert "<tr><td>ask_docs</td><td>1</td></tr>" in page
    assert "user [EMAIL] asks about ACLs" in page
    assert "ada.l@bank.example" not in page


def test_the_clients_page_lists_each_client_with_its_users(client, staff_user, mcp_users, django_user_model):
    staff_user("sales", SALES, MANAGERS)
    client.force_login(django_user_model.objects.get(username="sales"))
    response = client.get("/admin/docs_users/trackeduser/mcp-clients/")
    assert response.status_code == 200
    rows = [(row["mcp_client"], row["users"]) for row in response.context["rows"]]
    assert rows == [("Claude Code", 2), ("Cursor", 1)]
    assert "?mcp_client=Claude+Code" in response.content.decode()


def test_the_clients_page_needs_the_view_permission(client, staff_user, mcp_users, django_user_model):
    staff_user("nobody")
    client.force_login(django_user_model.objects.get(username="nobody"))
    assert client.get("/admin/docs_users/trackeduser/mcp-clients/").status_code == 403
    client.logout()
    assert client.get("/admin/docs_users/trackeduser/mcp-clients/").status_code == 302  # to the login page


@pytest.mark.browser
def test_a_salesperson_goes_from_the_clients_to_a_users_mcp_activity(browser_page, staff_user, mcp_users):
    staff_user("sales", SALES, MANAGERS)
    page = browser_page
    admin_login(page, "sales")
    page.goto("/admin/docs_users/trackeduser/")
    page.get_by_role("link", name="MCP clients seen").click()
    expect(page.locator("#mcp-clients tbody tr")).to_have_count(2)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SCREENSHOTS / "mcp-clients.png", full_page=True)
    page.locator("#mcp-clients tbody tr").first.get_by_role("link", name="2").click()
    expect(page.locator("#result_list tbody tr")).to_have_count(2)
    page.get_by_role("link", name="ada@acme.com").click()
    expect(page.locator(".field-mcp_recent_contexts")).to_contain_text("user [EMAIL] asks about ACLs")
    page.screenshot(path=SCREENSHOTS / "mcp-user.png", full_page=True)
