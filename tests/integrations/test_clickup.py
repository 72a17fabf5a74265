"""ClickUp API v2 Create Task contract, against a local server answering with the documented shapes.

Shapes: https://developer.clickup.com/reference/createtask (the Task object)
and ClickUp's error body `{"err": ..., "ECODE": ...}`.
"""

import logging

import pytest

from integrations.clickup.client import ClickUpClient, ClickUpTask, Priority, client_from_settings
from jobs.errors import PermanentError, TransientError

TOKEN = "pk_8877_S3CR3T"
LIST_ID = "901234567"
TASK_PATH = f"/api/v2/list/{LIST_ID}/task"
BODY = "**Source:** /pricing\n\n**Phone:** +44 20 7946 0958\n\n> We need help automating invoicing."


def created_task(task_id="86c1abcde", name="New lead: Ada Lovelace (Diagnostic)"):
    return {
        "id": task_id,
        "custom_id": None,
        "custom_item_id": 0,
        "name": name,
        "text_content": "Source: /pricing",
        "description": "Source: /pricing",
        "status": {"status": "to do", "color": "#87909e", "orderindex": 0, "type": "open"},
        "orderindex": "95403000.00000000000000000000000000000000",
        "date_created": "1764546612000",
        "date_updated": "1764546612000",
        "date_closed": None,
        "date_done": None,
        "archived": False,
        "creator": {"id": 8877, "username": "Lead bot", "color": "#827718", "email": "bot@acme.example"},
        "assignees": [],
        "group_assignees": [],
        "watchers": [],
        "checklists": [],
        "tags": [{"name": "web-form", "tag_fg": "#800000", "tag_bg": "#2ecd6f", "creator": 8877}],
        "parent": None,
        "top_level_parent": None,
        "priority": {"color": "#f50000", "id": "1", "orderindex": "1", "priority": "urgent"},
        "due_date": None,
        "start_date": None,
        "points": None,
        "time_estimate": None,
        "custom_fields": [],
        "dependencies": [],
        "linked_tasks": [],
        "locations": [],
        "team_id": "9012345",
        "url": f"https://app.clickup.com/t/{task_id}",
        "sharing": {"public": False},
        "permission_level": "create",
        "list": {"id": LIST_ID, "name": "Lead alerts", "access": True},
        "project": {"id": "90120001", "name": "Sales", "hidden": False, "access": True},
        "folder": {"id": "90120001", "name": "Sales", "hidden": False, "access": True},
        "space": {"id": "90110002"},
    }


@pytest.fixture
def clickup(httpserver):
    return ClickUpClient(TOKEN, list_id=LIST_ID, base_url=httpserver.url_for("/"))


def test_creates_a_task_in_the_alert_list_with_the_personal_token(clickup, httpserver):
    httpserver.expect_request(
        TASK_PATH,
        method="POST",
        headers={"Authorization": TOKEN},
        json={
            "name": "New lead: Ada Lovelace (Diagnostic)",
            "markdown_content": BODY,
            "priority": 1,
            "tags": ["web-form", "diagnostic"],
        },
    ).respond_with_json(created_task())

    task = clickup.create_task(
        name="New lead: Ada Lovelace (Diagnostic)",
        markdown_content=BODY,
        priority=Priority.URGENT,
        tags=("web-form", "diagnostic"),
    )

    assert task == ClickUpTask(id="86c1abcde", url="https://app.clickup.com/t/86c1abcde")


def test_priority_and_tags_are_optional(clickup, httpserver):
    httpserver.expect_request(
        TASK_PATH, method="POST", json={"name": "New lead", "markdown_content": BODY}
    ).respond_with_json(created_task(task_id="86c1abcdf"))
    assert clickup.create_task(name="New lead", markdown_content=BODY).id == "86c1abcdf"


@pytest.mark.parametrize(
    ("status", "error"),
    [(401, {"err": "Token invalid", "ECODE": "OAUTH_025"}), (400, {"err": "Task name invalid", "ECODE": "INPUT_005"})],
)
def test_client_errors_are_permanent(clickup, httpserver, status, error):
    httpserver.expect_request(TASK_PATH).respond_with_json(error, status=status)
    with pytest.raises(PermanentError):
        clickup.create_task(name="New lead", markdown_content=BODY)


@pytest.mark.parametrize("status", [429, 500, 503])
def test_rate_limits_and_server_errors_are_transient(clickup, httpserver, status):
    httpserver.expect_request(TASK_PATH).respond_with_json(
        {"err": "Rate limit exceeded"},
        status=status,
        headers={"X-RateLimit-Limit": "100", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1764546672"},
    )
    with pytest.raises(TransientError):
        clickup.create_task(name="New lead", markdown_content=BODY)


def test_a_success_without_a_task_id_is_permanent(clickup, httpserver):
    httpserver.expect_request(TASK_PATH).respond_with_json({"name": "New lead"})
    with pytest.raises(PermanentError):
        clickup.create_task(name="New lead", markdown_content=BODY)


def test_an_answer_that_is_not_json_is_transient(clickup, httpserver):
    httpserver.expect_request(TASK_PATH).respond_with_data("<html>maintenance</html>", content_type="text/html")
    with pytest.raises(TransientError):
        clickup.create_task(name="New lead", markdown_content=BODY)


def test_logs_carry_neither_the_token_nor_the_alert_text(clickup, httpserver, caplog):
    httpserver.expect_request(TASK_PATH).respond_with_json(created_task())
    with caplog.at_level(logging.DEBUG):
        clickup.create_task(name="New lead: Ada Lovelace", markdown_content=BODY)
    logged = "\n".join(r.getMessage() for r in caplog.records if not r.name.startswith("werkzeug"))
    assert TASK_PATH in logged
    for leaked in (TOKEN, "Ada Lovelace", "+44 20 7946 0958"):
        assert leaked not in logged


@pytest.mark.parametrize("missing", ["CLICKUP_API_TOKEN", "CLICKUP_LIST_ID"])
def test_not_configured_without_token_and_list(settings, missing):
    settings.CLICKUP_API_TOKEN, settings.CLICKUP_LIST_ID = TOKEN, LIST_ID
    setattr(settings, missing, "")
    assert client_from_settings() is None


def test_configured_client_uses_the_settings(settings, httpserver):
    settings.CLICKUP_API_TOKEN, settings.CLICKUP_LIST_ID = "pk_from_settings", "42"
    settings.CLICKUP_API_URL = httpserver.url_for("/")
    httpserver.expect_request(
        "/api/v2/list/42/task", method="POST", headers={"Authorization": "pk_from_settings"}
    ).respond_with_json(created_task())
    assert client_from_settings().create_task(name="New lead", markdown_content=BODY).id == "86c1abcde"
