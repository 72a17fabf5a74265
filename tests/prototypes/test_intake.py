"""What intake does for prototype-eligible leads: the prototype queued for the web form, created in
the request for the trusted chat agent (whose answer must be the truth)."""

import json

import pytest

from leadgen.models import Lead
from prototypes.models import Prototype
from tests.prototypes.conftest import run_jobs

pytestmark = pytest.mark.django_db
CHAT_KEY = "chat-key-for-prototypes"


@pytest.fixture(autouse=True)
def intake_settings(settings):
    settings.CHAT_API_KEY = CHAT_KEY
    settings.LLM_BASE_URL = ""
    settings.RECAPTCHA_SECRET_KEY = ""


def post(client, **headers):
    body = {
        "firstName": "Ada",
        "email": "ada@analytical.example",
        "message": "Our monthly reporting takes two days of copy and paste.",
        "serviceType": "process_automation",
    }
    return client.post("/api/leads", json.dumps(body), content_type="application/json", **headers)


def lookup(client):
    return client.get(
        "/api/leads/lookup",
        {"email": "ada@analytical.example"},
        HTTP_X_CHAT_API_KEY=CHAT_KEY,
        HTTP_X_USER_IP="203.0.113.7",
    ).json()


def test_the_web_form_gets_a_progress_page_for_its_queued_prototype(client, fake_v0):
    body = post(client).json()
    lead = Lead.objects.get(public_id=body["leadId"])
    assert body["prototype"] == {"state": "queued", "progressUrl": f"/prototype/{lead.public_id}/", "error": None}
    assert fake_v0.requests == [], "the browser's stream (or the first check) starts it"


def test_the_trusted_chat_path_creates_the_v0_chat_in_the_request(client, fake_v0):
    response = post(client, HTTP_X_CHAT_API_KEY=CHAT_KEY, HTTP_X_USER_IP="203.0.113.7")
    assert response.status_code == 200
    body = response.json()
    assert body["prototype"]["state"] == "generating" and body["prototype"]["error"] is None
    assert body["previewUrl"] is None, "V0 has not finished yet: no preview to promise"
    [chat] = fake_v0.chats.values()
    assert Prototype.objects.get().chat_id == chat.id
    rate = lookup(client)["rateLimit"]
    assert rate["email"]["inProgress"] and rate["ip"]["inProgress"], "the buckets are held at once"
    again = post(client, HTTP_X_CHAT_API_KEY=CHAT_KEY, HTTP_X_USER_IP="203.0.113.7")
    assert again.status_code == 429 and again.json()["error"]["code"] == "prototype_in_progress"


def test_the_trusted_chat_path_reports_a_v0_failure_and_frees_the_visitor(client, fake_v0):
    fake_v0.behaviour.create_status = 422
    body = post(client, HTTP_X_CHAT_API_KEY=CHAT_KEY, HTTP_X_USER_IP="203.0.113.7").json()
    assert body["prototype"]["state"] == "failed" and "HTTP 422" in body["prototype"]["error"]
    run_jobs("prototypes.finished")
    rate = lookup(client)["rateLimit"]
    assert not rate["email"]["inProgress"] and rate["email"]["used"] == 0, "hold dropped, no quota used"
