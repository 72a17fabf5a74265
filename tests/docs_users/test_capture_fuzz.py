"""Schemathesis over the capture endpoints: no 5xx, nothing that breaks the schema, docs-activity always 204."""

import pytest
import schemathesis
from django.core.cache import cache
from hypothesis import HealthCheck, settings
from rest_framework.throttling import SimpleRateThrottle
from schemathesis.checks import negative_data_rejection, positive_data_acceptance

from config.wsgi import application
from tests.fuzzing import carries_unstorable_text

pytestmark = pytest.mark.usefixtures("keep_the_test_transaction")

SERVICE_KEY = "mcp-key-for-fuzzing"

schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", application)
capture = schema.include(operation_id=["docs_activity", "tracking_mcp_events"])


@pytest.fixture(autouse=True)
def fuzzing_settings(settings, monkeypatch):
    settings.TRACKING_MCP_SERVICE_KEY = SERVICE_KEY
    monkeypatch.setitem(SimpleRateThrottle.THROTTLE_RATES, "mcp_events", "100000/min")
    cache.clear()


@pytest.mark.django_db
@capture.parametrize()
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
def test_capture_endpoints_never_fail_or_break_the_schema(case):
    if "X-Service-Key" in (case.headers or {}):
        case.headers["X-Service-Key"] = SERVICE_KEY  # explore past the key check too
    if case.operation.path == "/docs-activity":
        # By design it refuses nothing visibly: every answer is 204, whatever the body, so there is no
        # invalid request for it to reject; every other check applies.
        response = case.call_and_validate(excluded_checks=[negative_data_rejection])
        if case.method == "POST":
            assert response.status_code == 204
    else:
        # Text no input takes is refused wherever it is, keys of free-form objects included, which the schema
        # cannot say (tests.fuzzing.carries_unstorable_text); every other check applies.
        case.call_and_validate(excluded_checks=[positive_data_acceptance] if carries_unstorable_text(case) else [])
