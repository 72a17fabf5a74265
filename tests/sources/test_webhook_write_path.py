"""How a webhook's lead reaches the database: classified before any transaction opens, written in one
transaction, logged as failed (to replay) when that transaction breaks, and a source's change seen by the
next request."""

import json

import psycopg
import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from pytest_httpserver import HTTPServer
from werkzeug import Response

from jobs.models import Job
from leadgen.models import Lead
from sources.models import InboundRequest
from sources.services import request_replay
from tests.sources.support import SECRETS, post, signed, webhook_url

pytestmark = [pytest.mark.usefixtures("quiet_outside")]

CLASSIFIED_AS_LEAD = {
    "id": "chatcmpl-1", "object": "chat.completion", "created": 1764547200, "model": "gpt-4o-mini",
    "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": json.dumps(
        {"category": "lead", "confidence": 0.9, "reasoning": "A real need."})}}],
}  # fmt: skip


def open_transactions() -> int:
    """Sessions of this database with a transaction open and waiting (for the classifier, say)."""
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    with psycopg.connect(**params, autocommit=True) as other:
        return other.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND state LIKE 'idle in transaction%%'"
        ).fetchone()[0]


@pytest.mark.django_db(transaction=True)  # the request's own transactions, as in production
def test_the_classifier_answers_with_no_transaction_open_and_the_lead_is_written_in_one(client, settings, make_source):
    seen_open = []

    def classifier(request):
        seen_open.append(open_transactions())
        return Response(json.dumps(CLASSIFIED_AS_LEAD), content_type="application/json")

    with HTTPServer() as llm:
        llm.expect_request("/v1/chat/completions", method="POST").respond_with_handler(classifier)
        settings.LLM_BASE_URL, settings.LLM_API_KEY, settings.LLM_MODEL = llm.url_for("/v1"), "sk-test", "gpt-4o-mini"
        source = make_source("generic", send_confirmation=True)
        assert post(client, source, signed("generic", webhook_id="msg_1")).status_code == 200
        with CaptureQueriesContext(connection) as queries:
            second = post(client, source, signed("generic", webhook_id="msg_2"))

    assert second.status_code == 200 and seen_open == [0, 0], "no transaction held open while it answers"
    statements = [query["sql"].split(" (")[0] for query in queries.captured_queries]
    assert statements == [
        "BEGIN",
        "WITH new_row AS",  # the lead and its jobs in one statement
        'INSERT INTO "sources_inboundrequest"',
        'INSERT INTO "sources_inboundlead"',
        "COMMIT",
    ], "the source read once per process, then one transaction of three INSERTs, no savepoint"
    made = Lead.objects.get(public_id=second.json()["leads"][0])
    assert made.classified_by == "llm" and InboundRequest.objects.get(lead=made).outcome == "created"


@pytest.mark.django_db(transaction=True)  # a real failure of the request's own transaction
def test_a_request_whose_write_breaks_is_answered_500_kept_as_failed_and_made_once_replayed(make_source):
    source = make_source("generic")
    sent = signed("generic", webhook_id="msg_breaks")
    with connection.cursor() as cursor:  # the database refuses the dedup row, as a full disk or a bug would
        cursor.execute(
            "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused'; END $$;"
            " CREATE TRIGGER refuse BEFORE INSERT ON sources_inboundlead FOR EACH ROW EXECUTE FUNCTION refuse()"
        )
    try:
        answer = post(Client(raise_request_exception=False), source, sent)
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TRIGGER refuse ON sources_inboundlead; DROP FUNCTION refuse()")

    assert answer.status_code == 500, "the platform sends it again"
    assert not Lead.objects.exists() and not Job.objects.exists(), "nothing half-written"
    logged = InboundRequest.objects.get()
    assert (logged.outcome, logged.body, logged.lead) == ("failed", sent.body.decode(), None), "kept, to replay"
    assert logged.errors == {"request": ["Its processing did not finish."]}

    assert request_replay(request=logged, actor="ops") is True  # the request log's Replay action
    retried = post(Client(), source, signed("generic", webhook_id="msg_breaks"))  # the platform's own retry

    logged.refresh_from_db()
    made = Lead.objects.get()
    assert logged.outcome == "created" and logged.lead == made
    assert retried.status_code == 200 and retried.json()["leads"] == [str(made.public_id)]


@pytest.mark.django_db
def test_a_source_deactivated_or_given_a_new_secret_is_seen_by_the_next_request(client, make_source):
    source = make_source("generic")
    assert post(client, source, signed("generic")).status_code == 200

    source.secret = rotated = "whsec_" + "cm90YXRlZC1zZWNyZXQtb2YtdGhlLXNvdXJjZQ=="
    source.save()
    assert post(client, source, signed("generic", secret=SECRETS["generic"])).status_code == 401
    assert post(client, source, signed("generic", secret=rotated)).status_code == 200

    source.is_active = False
    source.save()
    assert client.post(webhook_url(source), b"{}", content_type="application/json").status_code == 404
