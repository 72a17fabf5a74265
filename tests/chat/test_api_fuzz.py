"""Schemathesis fuzzes the chat endpoints from the OpenAPI schema: no 5xx, answers as documented, nothing half-saved."""

import pytest
import schemathesis
from django.core.cache import cache
from hypothesis import HealthCheck, settings
from rest_framework.throttling import ScopedRateThrottle
from schemathesis.checks import not_a_server_error, positive_data_acceptance

from chat.models import ChatMessage
from config.wsgi import application
from tests.chat.conftest import CHAT_KEY

pytestmark = pytest.mark.usefixtures("keep_the_test_transaction")

schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", application)
chat_endpoints = schema.include(operation_id=["chat_stream", "chat_transcript"])


@pytest.fixture(autouse=True)
def no_agent(settings, monkeypatch):
    settings.CHAT_AGENT_URL = ""  # a valid message is answered 503 before anything is saved
    monkeypatch.setitem(ScopedRateThrottle.THROTTLE_RATES, "chat_transcript", "100000/min")
    cache.clear()


def test_the_stream_is_in_the_schema_with_its_events_described():
    operation = schema["/api/chat/stream"]["POST"]
    assert "text/event-stream" in str(operation.definition.raw["responses"]["200"]["content"])
    assert "`token`" in operation.definition.raw["responses"]["200"]["description"]


@pytest.mark.django_db
@chat_endpoints.parametrize()
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
def test_chat_endpoints_never_fail_or_break_the_schema(case):
    if "X-Chat-Api-Key" in (case.headers or {}):
        case.headers["X-Chat-Api-Key"] = CHAT_KEY  # explore past the key check too
    # Without an agent a valid message is the documented 503 (status_code_conformance still checks it). Our
    # validation knows more than the schema says (X-User-IP is an address, a widget token is signed), so
    # schema-valid data may still get a 4xx; every other check applies.
    case.call_and_validate(excluded_checks=[not_a_server_error, positive_data_acceptance])
    assert not ChatMessage.objects.exists()
