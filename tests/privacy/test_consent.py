"""The web form's consent on POST /api/leads: what the lead records is the server's text of the version the
person was shown, never a text the client makes up."""

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from leadgen.consent import CONSENT_TEXT, CONSENT_VERSION
from leadgen.models import Lead

pytestmark = pytest.mark.django_db


def post_lead(client, **overrides):
    body = {"firstName": "Ada", "email": "ada@analytical.example", "serviceType": "strategic_advice", **overrides}
    return client.post("/api/leads", json.dumps(body), content_type="application/json")


def test_the_version_and_text_shown_are_recorded_with_the_time(client):
    before = timezone.now()
    response = post_lead(client, consent={"version": CONSENT_VERSION, "text": CONSENT_TEXT})
    assert response.status_code == 200, response.content
    lead = Lead.objects.get()
    assert (lead.consent_version, lead.consent_text) == (CONSENT_VERSION, CONSENT_TEXT)
    assert before <= lead.consented_at <= timezone.now()


def test_true_or_the_version_alone_records_the_current_text(client):
    assert post_lead(client, consent=True).status_code == 200
    assert post_lead(client, email="b@example.com", consent={"version": CONSENT_VERSION}).status_code == 200
    assert list(Lead.objects.values_list("consent_version", "consent_text")) == [(CONSENT_VERSION, CONSENT_TEXT)] * 2


@pytest.mark.parametrize("consent", [False, None])
def test_no_consent_records_none(client, consent):
    body = {} if consent is None else {"consent": consent}
    assert post_lead(client, **body).status_code == 200
    lead = Lead.objects.get()
    assert (lead.consent_version, lead.consent_text, lead.consented_at) == ("", "", None)


@pytest.mark.parametrize(
    "consent, message",
    [
        ({"version": CONSENT_VERSION, "text": "I agree to nothing at all."}, "This is not the text of that version"),
        ({"version": CONSENT_VERSION, "text": CONSENT_TEXT + " And you may sell my data."}, "This is not the text"),
        ({"version": "1999-01", "text": CONSENT_TEXT}, "This version of the consent is unknown"),
        ({"text": CONSENT_TEXT}, "Send true, or the version"),
        ({"version": CONSENT_VERSION, "text": CONSENT_TEXT, "marketing": True}, "Send true, or the version"),
        ("yes", "Send true, or the version"),
        (1, "Send true, or the version"),
        (None, "may not be null"),
    ],
)
def test_a_claim_to_other_text_or_an_unknown_version_is_refused_and_nothing_is_saved(client, consent, message):
    response = post_lead(client, consent=consent)
    assert response.status_code == 400
    error = response.json()["error"]
    assert list(error["fields"]) == ["consent"]
    assert message in error["fields"]["consent"][0]
    assert not Lead.objects.exists()


def test_the_api_schema_states_exactly_the_consent_it_accepts(client):
    schema = client.get("/api/schema/?format=json").json()
    consent = schema["components"]["schemas"]["LeadInput"]["properties"]["consent"]
    boolean, version = consent["oneOf"]
    assert boolean == {"type": "boolean"}
    assert version["properties"]["version"]["enum"] == [CONSENT_VERSION]
    assert version["properties"]["text"]["enum"] == [CONSENT_TEXT]
    assert version["required"] == ["version"] and version["additionalProperties"] is False


def test_the_time_recorded_is_the_servers(client):
    response = post_lead(client, consent={"version": CONSENT_VERSION, "consentedAt": "2001-01-01T00:00:00Z"})
    assert response.status_code == 400, "a client cannot set the time either"
    post_lead(client, consent=True)
    assert timezone.now() - Lead.objects.get().consented_at < timedelta(minutes=1)
