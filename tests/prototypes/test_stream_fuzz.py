"""Schemathesis fuzzes the progress stream from the OpenAPI schema: no 5xx, answers as documented.

Generated ids are unknown leads (404); the examples also aim at known leads, each of whose streams ends
by itself: a completed prototype (its outcome at once, or 204 after its last id), a failed one, a lead
without a prototype (404). A stream that is still generating would stay open for minutes, which a fuzz
run cannot wait for: those streams are the subject of tests/prototypes/test_stream.py, against the fake V0.
"""

import uuid

import pytest
import schemathesis
from django.core.cache import cache
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from schemathesis.checks import positive_data_acceptance

from config.wsgi import application
from leadgen.models import Lead
from prototypes.models import Prototype, PrototypeEvent
from tests.fuzzing import carries_unstorable_text
from tests.prototypes.conftest import make_lead

pytestmark = [
    pytest.mark.usefixtures("keep_the_test_transaction"),
    # Under WSGI (schemathesis calls the WSGI app) Django reads the async stream to its end, and says so.
    pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume asynchronous iterators"),
]

schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", application)
stream = schema.include(operation_id=["leads_generate_stream"])

COMPLETED, FAILED, WITHOUT_PROTOTYPE = (uuid.UUID(int=n) for n in (101, 102, 103))
KNOWN = [str(COMPLETED), str(FAILED), str(WITHOUT_PROTOTYPE)]


@pytest.fixture
def known_leads(settings):
    settings.PROTOTYPES_STREAM_RATE = "100000/min"
    cache.clear()
    for public_id, state, kind, data in (
        (COMPLETED, "completed", "complete", {"state": "completed", "previewUrl": "https://p.example", "title": "T"}),
        (FAILED, "failed", "error", {"state": "failed", "message": "We could not finish it."}),
    ):
        lead = make_lead(email=f"{public_id.int}@example.com", client_ip=f"192.0.2.{public_id.int}")
        Lead.objects.filter(pk=lead.pk).update(public_id=public_id)
        progress = {"state": "generating", "status": "Starting your prototype", "title": "", "step": 0}
        PrototypeEvent.objects.create(prototype=lead.prototype, number=1, kind="progress", data=progress)
        PrototypeEvent.objects.create(prototype=lead.prototype, number=2, kind=kind, data=data)
        Prototype.objects.filter(pk=lead.prototype.pk).update(state=state, events=2, preview_url="https://p.example")
    lead = make_lead(service_type="dedicated_team", email="none@example.com", client_ip="192.0.2.200")
    Lead.objects.filter(pk=lead.pk).update(public_id=WITHOUT_PROTOTYPE)


def test_the_stream_is_in_the_schema_with_its_events_described():
    operation = schema["/api/leads/{lead_id}/generate-stream"]["GET"].definition.raw
    assert "text/event-stream" in operation["responses"]["200"]["content"]
    assert all(f"`{event}`" in operation["description"] for event in ("progress", "complete", "error"))
    assert {"Last-Event-ID", "lastEventId", "lead_id"} <= {parameter["name"] for parameter in operation["parameters"]}
    assert {"200", "204", "404", "429"} <= set(operation["responses"])


# The stream's reads run in threads of their own (an async view), which see only committed rows.
@pytest.mark.django_db(transaction=True)
@stream.parametrize()
@stream.given(known=st.one_of(st.none(), st.sampled_from(KNOWN)))
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
def test_the_stream_never_fails_or_breaks_the_schema(case, known, known_leads):
    if known is not None and case.meta is not None and case.meta.generation.mode.is_positive:
        case.path_parameters["lead_id"] = known  # a lead that exists, in a request the schema allows
    # Text PostgreSQL cannot store is refused by every input (tests.fuzzing), which the schema cannot state.
    excluded = [positive_data_acceptance] if carries_unstorable_text(case) else []
    case.call_and_validate(excluded_checks=excluded)
