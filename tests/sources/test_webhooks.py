"""Each source's webhook URL, driven by requests the stand-ins sign as each platform does, and the Graph API
stand-in over real HTTP: what arrives becomes one lead through the web form's pipeline, or is refused, or is
kept to replay."""

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
import requests
from django.urls import reverse
from django.utils import timezone
from pytest_httpserver import HTTPServer
from werkzeug import Response

from backoffice import dashboard
from foundation.limits import body_limit
from foundation.staff_groups import OPERATIONS
from jobs.models import Job
from leadgen.models import Lead
from sources.models import InboundLead, InboundRequest
from sources.services import FETCH_KIND, RETENTION_KIND, requests_retention_start
from standins import platforms as standin
from standins.graph_api import lead, lead_from_testing_tool
from tests.sources.support import (
    CHANNELS,
    SECRETS,
    VERIFY_TOKEN,
    post,
    replay,
    run_jobs,
    signed,
    source_form,
    webhook_url,
)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("quiet_outside")]

PUSHED_KINDS = ["google_ads", "typeform", "webflow", "generic"]  # the lead is in the request itself
SIGNATURE_HEADERS = {
    "facebook": ["x-hub-signature-256", "x-hub-signature"],
    "typeform": ["typeform-signature"],
    "webflow": ["x-webflow-signature"],
    "generic": ["webhook-signature"],
}
# Alerted, joined to its contact with an outreach task (crm), sent to Pipedrive.
DELIVERY = ["leadgen.lead_alert", "leadgen.lead_arrived", "leadgen.pipedrive_sync"]


def lead_jobs(lead_obj):
    return sorted(Job.objects.filter(key__endswith=f":{lead_obj.pk}").values_list("kind", flat=True))


def the_lead(response) -> Lead:
    [public_id] = response.json()["leads"]
    return Lead.objects.get(public_id=public_id)


@pytest.mark.parametrize("kind", PUSHED_KINDS)
def test_a_signed_lead_becomes_one_classified_lead_of_the_sources_store_with_its_delivery(
    client, make_source, downtown, kind
):
    source = make_source(kind, store=downtown)
    sent = signed(kind)
    response = post(client, source, sent)

    assert response.status_code == 200, response.content
    assert response.json()["received"] == 1
    made = the_lead(response)
    person = standin.PERSON
    assert (made.first_name, made.last_name, made.email, made.phone, made.company) == (
        person["first_name"], person["last_name"], person["email"], person["phone"], person["company"],
    )  # fmt: skip
    assert (made.channel, made.store, made.is_test) == (CHANNELS[kind], downtown, False)
    assert (made.status, made.classified_by, made.pipedrive_state) == ("lead", "rules", "pending")
    assert lead_jobs(made) == DELIVERY, "no confirmation unless the source says so"
    assert set(Job.objects.filter(kind__in=DELIVERY).values_list("store_id", flat=True)) == {downtown.pk}
    assert not Lead.objects.filter(prototype__isnull=False).exists()
    logged = InboundRequest.objects.get()
    assert (logged.outcome, logged.signature_ok, logged.lead, logged.store) == ("created", True, made, downtown)
    if kind == "google_ads":  # the body as sent, less the key: a secret travelling in the body
        assert SECRETS[kind] not in logged.body and json.loads(logged.body)["lead_id"] == sent.json()["lead_id"]
    else:
        assert logged.body == sent.body.decode()


def test_a_source_that_confirms_sends_the_confirmation_and_its_service_type_routes(client, make_source):
    source = make_source("generic", send_confirmation=True, default_service_type="dedicated_team")
    response = post(client, source, signed("generic"))

    made = the_lead(response)
    assert made.service_type == "dedicated_team"
    assert lead_jobs(made) == ["leadgen.confirmation_email", *DELIVERY]


def test_a_service_type_given_by_its_label_and_the_forms_other_answers_reach_the_lead(client, make_source):
    source = make_source("typeform")
    answers = [
        standin.typeform_answer("first_name", "text", "Ada"),
        standin.typeform_answer("email", "email", "ada@example.com"),
        standin.typeform_answer("service_type", "choice", "Strategic advice"),
        standin.typeform_answer("team_size", "choice", "10-50"),
    ]
    made = the_lead(post(client, source, signed("typeform", answers=answers, form_id="Fm42")))

    assert made.service_type == "strategic_advice"
    assert made.steps == {"team_size": "10-50"}, "questions the mapping does not read are kept for sales"
    assert made.utm == {"content": "Fm42"}


@pytest.mark.parametrize("kind", [*PUSHED_KINDS, "facebook"])
@pytest.mark.parametrize("how", ["wrong secret", "no signature"])
def test_a_bad_or_missing_signature_is_401_and_only_the_fact_is_kept(client, make_source, kind, how):
    source = make_source(kind)
    wrong = {"google_ads": "not-the-key", "generic": standin.standard_webhooks_secret()}.get(kind, "not-the-secret")
    if how == "wrong secret":
        request, drop = signed(kind, secret=wrong), ()
    elif kind == "google_ads":  # its key travels in the body
        request, drop = standin.PlatformRequest(signed(kind).body.replace(SECRETS[kind].encode(), b""), {}), ()
    else:
        request, drop = signed(kind), SIGNATURE_HEADERS[kind]

    response = post(client, source, request, drop=drop)

    assert response.status_code == 401, response.content
    assert response.json()["error"]["code"] == "invalid_signature"
    assert not Lead.objects.exists() and not InboundLead.objects.exists() and not Job.objects.exists()
    logged = InboundRequest.objects.get()
    assert (logged.outcome, logged.signature_ok, logged.body, logged.headers) == ("refused_signature", False, "", {})
    assert logged.results == {} and logged.fetched == {}


def test_a_source_without_a_secret_refuses_everything(client, make_source):
    source = make_source("typeform", secret="")
    assert post(client, source, signed("typeform", secret="")).status_code == 401
    assert not Lead.objects.exists()


def test_a_stale_webflow_request_is_refused(client, make_source):
    source = make_source("webflow")
    stale = signed("webflow", timestamp_ms=int((timezone.now() - timedelta(minutes=6)).timestamp() * 1000))
    assert post(client, source, stale).status_code == 401


@pytest.mark.parametrize("kind", PUSHED_KINDS)
def test_the_same_platform_id_twice_is_one_lead(client, make_source, kind):
    source = make_source(kind)
    ids = {
        "google_ads": {"lead_id": "TeSter-123"}, "typeform": {"token": "a3a12ec67a1365927098a606107fac15"},
        "webflow": {"submission_id": "6321ca84df3949bfc6752327"}, "generic": {"webhook_id": "msg_retry_1"},
    }  # fmt: skip
    first = post(client, source, signed(kind, **ids[kind]))
    again = post(client, source, signed(kind, **ids[kind]))  # the platform's retry, signed afresh

    assert (first.status_code, again.status_code) == (200, 200)
    assert first.json()["leads"] == again.json()["leads"]
    assert Lead.objects.count() == 1 and len(lead_jobs(Lead.objects.get())) == len(DELIVERY)
    outcomes = list(InboundRequest.objects.order_by("pk").values_list("outcome", flat=True))
    assert outcomes == ["created", "duplicate"]


def test_the_same_lead_at_another_source_is_another_lead(client, make_source):
    """Dedup is per source: two Typeform accounts may give the same token."""
    one, other = make_source("typeform"), make_source("typeform")
    post(client, one, signed("typeform", token="shared-token"))
    post(client, other, signed("typeform", token="shared-token"))
    assert Lead.objects.count() == 2


def test_facebooks_verification_handshake(client, make_source):
    source = make_source("facebook")
    url = webhook_url(source)

    answer = client.get(url, standin.facebook_verification(verify_token=VERIFY_TOKEN, challenge="1158201444"))
    assert (answer.status_code, answer.content, answer["Content-Type"]) == (200, b"1158201444", "text/plain")

    wrong = client.get(url, standin.facebook_verification(verify_token="guess"))
    assert wrong.status_code == 403 and wrong.json()["error"]["code"] == "permission_denied"
    assert client.get(webhook_url(make_source("typeform")), {"hub.mode": "subscribe"}).status_code == 404


def test_an_unknown_malformed_or_inactive_source_is_404(client, make_source):
    inactive = make_source("generic", is_active=False)
    for url in (webhook_url(inactive), "/api/sources/not-a-uuid/webhook",
                "/api/sources/8d0b9c6e-3f5b-4c7e-9a1d-2b3c4d5e6f70/webhook"):  # fmt: skip
        response = client.post(url, b"{}", content_type="application/json")
        assert response.status_code == 404 and response.json()["error"]["code"] == "not_found", url
    assert not InboundRequest.objects.exists()


def test_a_body_over_the_limit_is_413(client, make_source, settings):
    settings.SOURCES_MAX_BODY_BYTES = 1000
    source = make_source("generic")
    response = post(client, source, signed("generic", payload={**standin.PERSON, "message": "x" * 2000}))
    assert response.status_code == 413
    assert not InboundRequest.objects.exists()
    assert body_limit(webhook_url(source)) == 1000, "the web process stops reading it there (config.serve)"


def test_facebook_leads_are_fetched_by_a_job_that_retries_graph_failures_and_makes_the_lead_once(
    client, make_source, downtown, graph
):
    source = make_source("facebook", store=downtown)
    leadgen_id = "444444444444444"
    graph.add(lead(leadgen_id))
    notification = signed("facebook", leadgen_ids=[leadgen_id])

    accepted = post(client, source, notification)
    assert accepted.status_code == 202 and accepted.json() == {"received": 1, "leads": []}
    fetch = Job.objects.get(kind=FETCH_KIND)
    assert fetch.store_id == downtown.pk and "field_data" not in str(fetch.payload)

    graph.fail_next(1)  # Graph is down
    assert run_jobs(FETCH_KIND) == 1
    fetch.refresh_from_db()
    assert (fetch.status, fetch.attempts) == ("pending", 1), "a transient failure: retried by the job layer"
    assert not Lead.objects.exists()
    logged = InboundRequest.objects.get()
    assert logged.outcome == "pending_fetch" and "fetch" in logged.errors

    assert post(client, source, notification).status_code == 202, "Facebook's retry while the fetch is pending"
    assert Job.objects.filter(kind=FETCH_KIND).count() == 1

    assert run_jobs(FETCH_KIND) == 1  # Graph is back
    fetch.refresh_from_db()
    assert fetch.status == "succeeded"
    made = Lead.objects.get()
    assert (made.channel, made.email, made.first_name, made.last_name) == ("facebook", "ada@example.com", "Ada",
                                                                           "Lovelace")  # fmt: skip
    assert (made.store, made.utm) == (downtown, {"campaign": "999999999999999", "content": "555555555555555"})
    assert lead_jobs(made) == DELIVERY
    logged.refresh_from_db()
    assert (logged.outcome, logged.lead, logged.errors) == ("created", made, {})
    assert all(f"/{leadgen_id}?" in target and "appsecret_proof=" in target for target in graph.requests)
    assert all("access_token" not in target for target in graph.requests), "the token goes in a header"

    again = post(client, source, notification)
    assert again.status_code == 200 and again.json()["leads"] == [str(made.public_id)]
    assert Lead.objects.count() == 1 and Job.objects.filter(kind=FETCH_KIND).count() == 1


def test_one_facebook_notification_may_carry_several_leads(client, make_source, graph):
    source = make_source("facebook")
    graph.add(lead("100000000000001"), lead("100000000000002", {"full_name": "Grace Hopper",
                                                                "email": "grace@example.com"}))  # fmt: skip
    notification = signed("facebook", leadgen_ids=["100000000000001", "100000000000002"])
    assert post(client, source, notification).status_code == 202
    run_jobs(FETCH_KIND)
    assert sorted(Lead.objects.values_list("email", flat=True)) == ["ada@example.com", "grace@example.com"]
    logged = InboundRequest.objects.get()
    assert logged.outcome == "created" and set(logged.results) == {"100000000000001", "100000000000002"}


def test_a_facebook_lead_graph_refuses_is_failed_and_replayed_once_the_token_is_fixed(
    client, make_source, downtown, graph, staff
):
    source = make_source("facebook", access_token="an-expired-token", store=downtown)
    graph.add(lead("200000000000001"))
    post(client, source, signed("facebook", leadgen_ids=["200000000000001"]))
    run_jobs(FETCH_KIND)
    fetch = Job.objects.get(kind=FETCH_KIND)
    logged = InboundRequest.objects.get()
    assert fetch.status == "dead" and logged.outcome == "failed" and not Lead.objects.exists()
    assert "190" in logged.errors["fetch"][0], "Graph's code says why: the token"

    source.access_token = graph.access_token
    source.save()
    client.force_login(staff("ops", OPERATIONS, stores=[downtown]))
    replay(client, logged)
    run_jobs(FETCH_KIND)
    logged.refresh_from_db()
    assert logged.outcome == "created" and Lead.objects.count() == 1


def test_a_payload_the_mapping_cannot_read_is_kept_and_made_once_replayed_after_the_mapping_is_fixed(
    client, make_source, downtown, staff
):
    mapping = {"email": "contact", "full_name": "contact.name"}
    source = make_source("generic", field_mapping=mapping, store=downtown)
    payload = {"contact": {"name": "Ada Lovelace", "mail": "ada@example.com"}, "form": "pricing"}
    sent = signed("generic", payload=payload, webhook_id="msg_zap_1")

    refused = post(client, source, sent)
    retried = post(client, source, sent)  # the sender's retry of the same message

    assert (refused.status_code, retried.status_code) == (422, 422)
    error = refused.json()["error"]
    assert error["code"] == "unreadable" and "email" in error["fields"]
    assert not Lead.objects.exists() and not Job.objects.exists()
    first, second = InboundRequest.objects.order_by("pk")
    assert first.outcome == "unreadable" and first.body == sent.body.decode(), "kept, not lost"

    client.force_login(staff("ops", OPERATIONS, stores=[downtown]))
    fixed = {"email": "contact.mail", "full_name": "contact.name"}
    form = source_form(source, field_mapping='{"email": "contact.mail", "full_name": "contact.name"}')
    saved = client.post(reverse("admin:sources_inboundsource_change", args=[source.pk]), form)
    assert saved.status_code == 302, saved.content
    source.refresh_from_db()
    assert source.field_mapping == fixed and source.secret == SECRETS["generic"], "a blank secret is kept"

    replay(client, first, second)

    made = Lead.objects.get()
    assert (made.email, made.first_name, made.channel) == ("ada@example.com", "Ada", "webhook")
    assert lead_jobs(made) == DELIVERY
    first.refresh_from_db()
    second.refresh_from_db()
    assert {first.outcome, second.outcome} == {"created", "duplicate"}, "the dedup keeps it once"
    assert replay(client, first).status_code == 302 and Lead.objects.count() == 1


def test_a_lead_without_a_valid_email_is_422_per_field_and_kept(client, make_source):
    source = make_source("webflow")
    response = post(client, source, signed("webflow", data={"Name": "Ada", "Email": "not-an-email", "Phone": "12"}))

    assert response.status_code == 422
    assert response.json()["error"]["code"] == "invalid"
    assert set(response.json()["error"]["fields"]) == {"email", "phone"}
    assert InboundRequest.objects.get().outcome == "invalid" and not Lead.objects.exists()


def test_an_optional_field_that_fails_its_check_is_left_out_and_recorded_the_lead_kept(client, make_source):
    source = make_source("webflow")
    response = post(client, source, signed("webflow", data={"Name": "Ada", "Email": "ada@example.com", "Phone": "12"}))

    assert response.status_code == 200
    made = the_lead(response)
    assert (made.email, made.phone) == ("ada@example.com", "")
    logged = InboundRequest.objects.get()
    assert logged.outcome == "created" and list(logged.errors) == ["phone"]


@pytest.mark.parametrize("kind", ["google_ads", "facebook"])
def test_a_test_lead_is_kept_marked_and_sets_nothing_off(client, make_source, graph, kind):
    source = make_source(kind, send_confirmation=True)
    if kind == "facebook":
        graph.add(lead_from_testing_tool("300000000000001"))
        post(client, source, signed(kind, leadgen_ids=["300000000000001"]))
        run_jobs(FETCH_KIND)
    else:
        assert post(client, source, signed(kind, is_test=True)).status_code == 200

    made = Lead.objects.get()
    assert made.is_test and made.pipedrive_state == "not_sent"
    assert lead_jobs(made) == [], "never delivered, alerted or emailed"
    assert InboundRequest.objects.get().outcome == "test"


def test_a_request_with_no_lead_in_it_is_answered_and_logged(client, make_source):
    source = make_source("typeform")
    response = post(client, source, signed("typeform", event_type="form_response_partial"))
    assert response.status_code == 200 and response.json() == {"received": 0, "leads": []}
    assert InboundRequest.objects.get().outcome == "ignored"


def test_the_request_log_is_kept_for_its_days_and_the_leads_stay(client, make_source, settings):
    settings.SOURCES_REQUEST_LOG_DAYS = 30
    source = make_source("generic")
    post(client, source, signed("generic"))
    post(client, source, signed("generic"))
    old, recent = InboundRequest.objects.order_by("pk")
    InboundRequest.objects.filter(pk=old.pk).update(received_at=timezone.now() - timedelta(days=31))

    requests_retention_start()
    run_jobs(RETENTION_KIND)

    assert list(InboundRequest.objects.all()) == [recent]
    assert Lead.objects.count() == 2 and InboundLead.objects.count() == 2


def test_the_dashboard_counts_a_sources_leads_under_its_channel_and_no_test_lead(client, make_source):
    post(client, make_source("generic"), signed("generic"))
    post(client, make_source("google_ads"), signed("google_ads", is_test=True))

    daily = dashboard.leads_per_day(period=dashboard.Period.last_days(1))
    assert daily.by_channel["webhook"] == [1]
    assert "google_ads" not in daily.by_channel, "a channel that sent no lead but a test one is not charted"
    assert daily.by_status["lead"] == [1]
    assert dashboard.CHANNEL_LABELS["webhook"] == "Webhook"


CLASSIFIED_AS_LEAD = {
    "id": "chatcmpl-1", "object": "chat.completion", "created": 1764547200, "model": "gpt-4o-mini",
    "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": json.dumps(
        {"category": "lead", "confidence": 0.9, "reasoning": "A real need."})}}],
}  # fmt: skip


@pytest.mark.django_db(transaction=True)  # two requests at once, each on its own connection
def test_a_retry_arriving_while_the_first_is_still_processed_is_one_lead(live_server, settings, make_source):
    both_classifying = threading.Barrier(2, timeout=10)

    def classifier(request):
        both_classifying.wait()  # neither request has saved its lead yet
        return Response(json.dumps(CLASSIFIED_AS_LEAD), content_type="application/json")

    llm = HTTPServer(threaded=True)
    llm.expect_request("/v1/chat/completions", method="POST").respond_with_handler(classifier)
    llm.start()
    settings.LLM_BASE_URL, settings.LLM_API_KEY, settings.LLM_MODEL = llm.url_for("/v1"), "sk-test", "gpt-4o-mini"
    settings.LLM_TIMEOUT_SECONDS = 10
    source = make_source("generic")
    sent = signed("generic", webhook_id="msg_sent_twice")
    try:
        with ThreadPoolExecutor(2) as pool:
            answers = list(pool.map(
                lambda _: requests.post(live_server.url + webhook_url(source), data=sent.body, headers=sent.headers,
                                        timeout=20),
                range(2),
            ))  # fmt: skip
    finally:
        llm.stop()

    assert [answer.status_code for answer in answers] == [200, 200]
    assert answers[0].json()["leads"] == answers[1].json()["leads"]
    made = Lead.objects.get()
    assert made.classified_by == "llm" and len(lead_jobs(made)) == len(DELIVERY)
    assert sorted(InboundRequest.objects.values_list("outcome", flat=True)) == ["created", "duplicate"]
