"""Schemathesis over the two read operations, WordPress answering: no 5xx, nothing that breaks the schema."""

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from rest_framework.throttling import SimpleRateThrottle
from schemathesis.checks import positive_data_acceptance

from config.wsgi import application

pytestmark = pytest.mark.usefixtures("keep_the_test_transaction")

schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", application)
reads = schema.include(operation_id=["blog_posts_list", "blog_post_detail"])


@pytest.fixture(autouse=True)
def fuzzing_settings(monkeypatch, wordpress):
    for scope in ("blog", "blog_refresh"):
        monkeypatch.setitem(SimpleRateThrottle.THROTTLE_RATES, scope, "100000/min")


@pytest.mark.django_db
@reads.parametrize()
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
def test_blog_reads_never_fail_or_break_the_schema(case):
    # A valid page may lie past the last one (404) and a valid slug may name no post.
    case.call_and_validate(excluded_checks=[positive_data_acceptance])
