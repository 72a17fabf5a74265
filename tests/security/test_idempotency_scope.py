"""`Idempotency-Key` on POST /api/leads: a replay is the first answer byte for byte, and a key belongs to
the caller that sent it (a visitor's network, or the authenticated chat agent), so nobody else can replay
it or learn that it exists."""

import json

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from leadgen.models import IdempotentRequest, Lead

pytestmark = pytest.mark.django_db

CHAT_KEY = "chat-key-for-tests"


@pytest.fixture(autouse=True)
def intake_settings(settings):
    settings.CHAT_API_KEY = CHAT_KEY
    settings.LLM_BASE_URL = ""
    settings.RECAPTCHA_SECRET_KEY = ""


def submission(**overrides):
    body = {
        "firstName": "Ada",
        "lastName": "Lovelace",
        "email": "ada@analytical.example",
        "company": "Analytical Engines",
        "message": "We want to automate our quote-to-cash process.",
        "serviceType": "strategic_advice",
    }
    body.update(overrides)
    return body


def post_lead(client, body, *, key, ip="198.51.100.7", **headers):
    return client.post(
        "/api/leads",
        json.dumps(body),
        content_type="application/json",
        HTTP_IDEMPOTENCY_KEY=key,
        REMOTE_ADDR=ip,
        **headers,
    )


def test_a_replay_is_the_first_answer_byte_for_byte(client):
    first = post_lead(client, submission(), key="form-1")
    again = post_lead(client, submission(), key="form-1")
    assert first.status_code == again.status_code == 200
    assert again["Idempotent-Replayed"] == "true"
    assert again.content == first.content, "same bytes, keys in the order first sent"
    assert list(again.json()) == ["leadId", "previewUrl", "pipedrive", "prototype"]
    assert again["Content-Type"] == first["Content-Type"] == "application/json"
    assert Lead.objects.count() == 1


def test_a_refusal_is_replayed_byte_for_byte_too(client, settings):
    settings.RECAPTCHA_SECRET_KEY = "recaptcha-secret"  # and no token sent: refused before any outside call
    first = post_lead(client, submission(), key="form-2")
    again = post_lead(client, submission(), key="form-2")
    assert first.status_code == 400 and first.json()["error"]["code"] == "recaptcha_missing"
    assert again["Idempotent-Replayed"] == "true"
    assert (again.status_code, again.content, again["Content-Type"]) == (400, first.content, first["Content-Type"])


def test_another_visitors_same_key_and_body_is_a_new_request(client):
    mine = post_lead(client, submission(), key="form-3", ip="198.51.100.7")
    theirs = post_lead(client, submission(), key="form-3", ip="203.0.113.9")
    assert theirs.status_code == 200
    assert "Idempotent-Replayed" not in theirs
    assert theirs.json()["leadId"] != mine.json()["leadId"], "nobody else's lead id is handed out"
    assert Lead.objects.count() == 2


def test_another_visitors_same_key_with_another_body_is_not_told_the_key_exists(client):
    post_lead(client, submission(), key="form-4", ip="198.51.100.7")
    theirs = post_lead(client, submission(email="eve@elsewhere.example"), key="form-4", ip="203.0.113.9")
    assert theirs.status_code == 200, theirs.content
    assert "Idempotent-Replayed" not in theirs
    # The owner's own key still guards the owner's request.
    reused = post_lead(client, submission(message="Something else"), key="form-4", ip="198.51.100.7")
    assert reused.status_code == 422 and reused.json()["error"]["code"] == "idempotency_key_reused"


def test_a_visitor_whose_ipv6_privacy_address_changed_still_gets_the_replay(client):
    first = post_lead(client, submission(), key="form-5", ip="2001:db8:1:2::a")
    again = post_lead(client, submission(), key="form-5", ip="2001:db8:1:2:9f3c::77")
    assert again["Idempotent-Replayed"] == "true" and again.content == first.content
    other_network = post_lead(client, submission(), key="form-5", ip="2001:db8:1:3::a")
    assert "Idempotent-Replayed" not in other_network


def test_the_chat_agents_keys_are_its_own_wherever_it_calls_from(client):
    chat = {"HTTP_X_CHAT_API_KEY": CHAT_KEY, "HTTP_X_USER_IP": "192.0.2.44"}
    visitor = post_lead(client, submission(), key="chat-1", ip="10.0.0.5")
    first = post_lead(client, submission(), key="chat-1", ip="10.0.0.5", **chat)
    assert "Idempotent-Replayed" not in first, "a visitor on the agent's network does not share its keys"
    assert first.json()["leadId"] != visitor.json()["leadId"]
    # The agent retries from another of its hosts: still its key.
    again = post_lead(client, submission(), key="chat-1", ip="10.0.0.6", **chat)
    assert again["Idempotent-Replayed"] == "true" and again.content == first.content
    # A visitor cannot reach the agent's keys by sending the address the agent reported.
    spoof = post_lead(client, submission(), key="chat-1", ip="192.0.2.44")
    assert "Idempotent-Replayed" not in spoof
    assert Lead.objects.count() == 3


def test_the_table_keeps_no_visitor_address(client):
    post_lead(client, submission(), key="form-6", ip="198.51.100.77")
    record = IdempotentRequest.objects.get(key="form-6")
    assert "198.51.100.77" not in json.dumps([str(value) for value in vars(record).values()])


@pytest.mark.django_db(transaction=True)
def test_records_from_before_keys_were_per_caller_survive_the_migration_both_ways():
    before, after = [("leadgen", "0009_lead_public_id")], [("leadgen", "0010_idempotent_request_per_caller_bytes")]

    def migrate(targets):
        executor = MigrationExecutor(connection)
        executor.migrate(targets)
        return executor.loader.project_state(targets).apps.get_model("leadgen", "IdempotentRequest")

    try:
        Old = migrate(before)
        Old.objects.create(
            scope="leads.create", key="k1", request_hash="h1", response_status=200, response_body={"leadId": "é"}
        )
        Old.objects.create(scope="leads.create", key="k2", request_hash="h2", response_status=0, response_body={})

        New = migrate(after)
        rows = {row.key: row for row in New.objects.all()}
        assert bytes(rows["k1"].response_content) == '{"leadId":"é"}'.encode()
        assert (rows["k1"].response_content_type, rows["k1"].caller) == ("application/json", "")
        assert (bytes(rows["k2"].response_content), rows["k2"].response_status) == (b"", 0)
        New.objects.create(
            scope="leads.create", caller="someone", key="k1", request_hash="h3", response_status=200,
            response_content=b'{"leadId":"x"}', response_content_type="application/json",
        )  # fmt: skip

        Old = migrate(before)
        assert sorted(Old.objects.values_list("key", "response_body")) == [("k1", {"leadId": "é"}), ("k2", {})]
    finally:
        migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
