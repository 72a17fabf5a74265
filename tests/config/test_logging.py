"""One log line per request, without the query string, in the format the reader needs."""

import logging

import pytest

from foundation.logging import log_format

pytestmark = pytest.mark.django_db


def events(caplog):
    return [record.msg for record in caplog.records if isinstance(record.msg, dict)]


def test_one_line_per_request_with_path_status_and_duration_but_no_query_string(client, caplog):
    caplog.set_level(logging.INFO)
    client.get("/api/leads/lookup?email=ada@example.com")
    requests = [event for event in events(caplog) if event["event"].startswith("request_")]
    assert [event["event"] for event in requests] == ["request_finished"]
    [finished] = requests
    assert finished["request"] == "GET /api/leads/lookup"
    assert "ada@example.com" not in repr(events(caplog))
    assert isinstance(finished["duration_ms"], int) and "code" in finished and finished["request_id"]


def test_format_follows_the_setting_then_the_terminal(monkeypatch):
    assert log_format("json") == "json"
    assert log_format("console") == "console"
    monkeypatch.setattr("sys.stderr.isatty", lambda: False)
    assert log_format("") == "json"
    monkeypatch.setattr("sys.stderr.isatty", lambda: True)
    assert log_format("") == "console"
