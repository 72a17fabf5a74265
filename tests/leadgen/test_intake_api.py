"""POST /api/leads and GET /api/leads/lookup as a browser and the chat agent use them."""

import json
import time
from datetime import timedelta

import psycopg
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.throttling import ScopedRateThrottle
from werkzeug import Response

from chat.models import ChatSession
from jobs.models import Job
from leadgen.models import IdempotentRequest, Lead
from leadgen.ratelimit import prototype_buckets_consume
from leadgen.tasks import purge_idempotency_keys
from tests.conftest import minute_with_time_left

pytestmark = pytest.mark.django_db

CHAT_KEY = "chat-key-for-tests"


def submission(**overrides):
    body = {
        "firstName": "Ada",
        "lastName": "Lovelace",
        "email": "ada@analytical.example",
        "phone": "+1 415 555 0100",
        "company": "Analytical Engines",
        "message": "We want to automate our quote-to-cash process.",
        "serviceType": "strategic_advice",
        "sourcePage": "https://example.com/services/strategy",
        "utm": {"source": "newsletter", "campaign": "autumn"},
        "steps": {"teamSize": "10-50", "tools": ["HubSpot", "Sheets"]},
    }
    body.update(overrides)
    return body


def post_lead(client, body, **headers):
    return client.post("/api/leads", json.dumps(body), content_type="application/json", **headers)


def lead_job_kinds(lead_id):
    return sorted(Job.objects.filter(key__endswith=f":{lead_id}").values_list("kind", flat=True))


@pytest.fixture(autouse=True)
def intake_settings(settings):
    settings.CHAT_API_KEY = CHAT_KEY
    settings.LLM_BASE_URL = ""
    settings.RECAPTCHA_SECRET_KEY = ""


@pytest.fixture
def llm(httpserver, settings):
    settings.LLM_BASE_URL = httpserver.url_for("/v1")
    settings.LLM_API_KEY = "sk-test"
    settings.LLM_MODEL = "gpt-4o-mini"
    settings.LLM_TIMEOUT_SECONDS = 0.5

    def answer(content):
        httpserver.expect_request("/v1/chat/completions", method="POST").respond_with_json(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 1764547200,
                "model": "gpt-4o-mini",
                "choices": [
                    {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}
                ],
                "usage": {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150},
            }
        )

    return answer


@pytest.fixture
def recaptcha(httpserver, settings):
    settings.RECAPTCHA_SECRET_KEY = "recaptcha-secret"
    settings.RECAPTCHA_VERIFY_URL = httpserver.url_for("/recaptcha/api/siteverify")
    settings.RECAPTCHA_HOSTNAMES = ["example.com"]

    def answer(**fields):
        verdict = {
            "success": True,
            "score": 0.9,
            "action": "lead_form",
            "challenge_ts": "2026-11-30T12:00:00Z",
            "hostname": "example.com",
        }
        verdict.update(fields)
        httpserver.expect_request("/recaptcha/api/siteverify", method="POST").respond_with_json(verdict)

    return answer


def test_a_lead_is_saved_and_its_side_effects_queued(client):
    response = post_lead(client, submission())
    assert response.status_code == 200, response.content
    body = response.json()
    lead = Lead.objects.get(public_id=body["leadId"])
    assert body == {
        "leadId": str(lead.public_id),
        "previewUrl": None,
        "pipedrive": {"status": "pending", "leadId": None},
        "prototype": None,
    }
    assert (lead.status, lead.category, lead.classified_by) == ("lead", "lead", "rules")
    assert lead.phone == "+14155550100", "normalized to E.164"
    assert lead.steps == {"teamSize": "10-50", "tools": ["HubSpot", "Sheets"]}
    assert lead.utm == {"source": "newsletter", "campaign": "autumn"}
    assert lead.client_ip == "127.0.0.1"
    assert lead_job_kinds(lead.pk) == [
        "leadgen.confirmation_email",
        "leadgen.lead_alert",
        "leadgen.lead_arrived",  # its contact and outreach task (crm)
        "leadgen.pipedrive_sync",
    ]
    email_job = Job.objects.get(kind="leadgen.confirmation_email")
    assert email_job.run_after - lead.created_at == timedelta(seconds=600), "confirmation waits 10 minutes"
    alert_job = Job.objects.get(kind="leadgen.lead_alert")
    assert alert_job.run_after <= lead.created_at + timedelta(seconds=1), "the alert goes out at once"


def test_a_new_lead_and_its_jobs_are_one_statement_and_one_run_message(client, django_capture_on_commit_callbacks):
    with CaptureQueriesContext(connection) as queries, django_capture_on_commit_callbacks() as callbacks:
        response = post_lead(client, submission())
    assert response.status_code == 200, response.content
    # The test's own transaction turns lead_create's BEGIN/COMMIT into SAVEPOINT/RELEASE.
    ignored = ("SELECT", "SAVEPOINT", "RELEASE")
    writes = [q["sql"].split()[0] for q in queries.captured_queries if not q["sql"].startswith(ignored)]
    assert writes == ["WITH"], "the lead and its four jobs in one statement (a data-modifying CTE)"
    assert len(callbacks) == 1, "one after-commit callback publishes the due jobs"
    lead = Lead.objects.get(public_id=response.json()["leadId"])
    assert lead.pipedrive_state == Lead.PipedriveState.PENDING
    dispatched = Job.objects.filter(key__endswith=f":{lead.pk}", dispatched_at__isnull=False)
    assert sorted(dispatched.values_list("kind", flat=True)) == [
        "leadgen.lead_alert", "leadgen.lead_arrived", "leadgen.pipedrive_sync",
    ]  # fmt: skip


@pytest.mark.parametrize(
    "overrides, field",
    [
        ({"email": "not-an-email"}, "email"),
        ({"firstName": ""}, "firstName"),
        ({"phone": "12"}, "phone"),
        ({"serviceType": "astrology"}, "serviceType"),
        ({"message": "x" * 5001}, "message"),
        ({"sourcePage": "javascript:alert(1)"}, "sourcePage"),
        ({"steps": {f"q{n}": "a" for n in range(31)}}, "steps"),
        ({"steps": {"q": {"nested": "object"}}}, "steps"),
        ({"utm": {"source": "s" * 201}}, "utm"),
        ({"lastName": 0}, "lastName"),
        ({"company": True}, "company"),
        # Lengths count the text as sent: padding that trimming would remove does not make it fit.
        ({"firstName": "\tT/" + "*" * 98}, "firstName"),
        ({"email": " " + "a" * 245 + "@acme.com"}, "email"),
    ],
)
def test_invalid_fields_get_a_400_naming_them_and_nothing_is_saved(client, overrides, field):
    response = post_lead(client, submission(**overrides))
    assert response.status_code == 400
    assert field in response.json()["error"]["fields"]
    assert not Lead.objects.exists() and not Job.objects.exists()


def test_an_oversized_body_is_refused_before_parsing(client):
    response = post_lead(client, submission(message="x" * 70_000))
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "too_large"
    assert not Lead.objects.exists()


def test_spam_is_saved_and_goes_no_further(client):
    response = post_lead(client, submission(email="bot@mailinator.com"))
    assert response.status_code == 200
    lead = Lead.objects.get()
    assert lead.status == "spam" and "Disposable" in lead.reasoning
    assert not Job.objects.exists()


def test_a_vendor_pitch_gets_only_a_decline_email(client):
    response = post_lead(client, submission(message="We offer SEO services and backlinks for your site."))
    assert response.status_code == 200
    lead = Lead.objects.get()
    assert lead.status == "vendor"
    assert lead_job_kinds(lead.pk) == ["leadgen.vendor_decline_email"]


def test_filters_switched_off_let_spam_and_vendors_through_as_leads(client, settings):
    settings.LEADS_SPAM_FILTER_ENABLED = False
    settings.LEADS_VENDOR_FILTER_ENABLED = False
    post_lead(client, submission(email="bot@mailinator.com"))
    post_lead(client, submission(email="seo@agency.example", message="Our agency offers link building."))
    assert sorted(Lead.objects.values_list("category", "status")) == [("spam", "lead"), ("vendor", "lead")]
    assert Job.objects.filter(kind="leadgen.pipedrive_sync").count() == 2


def test_the_llm_decides_when_it_answers(client, llm):
    llm(json.dumps({"category": "vendor", "confidence": 0.93, "reasoning": "Offers outsourced development."}))
    post_lead(client, submission(message="Hello, we build apps cheaply."))
    lead = Lead.objects.get()
    assert (lead.status, lead.classified_by, lead.confidence) == ("vendor", "llm", 0.93)


@pytest.mark.parametrize("content", ["not json at all", json.dumps({"category": "maybe", "confidence": 2})])
def test_a_malformed_llm_answer_falls_back_to_the_rules(client, llm, content):
    llm(content)
    assert post_lead(client, submission()).status_code == 200
    lead = Lead.objects.get()
    assert (lead.status, lead.classified_by) == ("lead", "rules")


def test_a_slow_llm_falls_back_to_the_rules_within_its_timeout(client, llm, httpserver):
    def slow(request):
        time.sleep(1)
        return Response("{}", content_type="application/json")

    httpserver.expect_request("/v1/chat/completions").respond_with_handler(slow)
    started = time.monotonic()
    response = post_lead(client, submission())
    assert response.status_code == 200
    assert time.monotonic() - started < 1
    assert Lead.objects.get().classified_by == "rules"


def test_an_llm_outage_falls_back_to_the_rules(client, llm, httpserver):
    httpserver.expect_request("/v1/chat/completions").respond_with_json({"error": "down"}, status=500)
    assert post_lead(client, submission()).status_code == 200
    assert Lead.objects.get().classified_by == "rules"


def test_recaptcha_pass(client, recaptcha, httpserver):
    recaptcha()
    response = post_lead(client, submission(recaptchaToken="token-from-browser"))
    assert response.status_code == 200
    [(request, _)] = httpserver.log
    assert request.form["response"] == "token-from-browser" and request.form["secret"] == "recaptcha-secret"


@pytest.mark.parametrize(
    "verdict, code",
    [
        ({"score": 0.1}, "recaptcha_low_score"),
        ({"action": "login"}, "recaptcha_action_mismatch"),
        ({"hostname": "evil.example"}, "recaptcha_hostname_mismatch"),
        ({"success": False, "error-codes": ["invalid-input-response"]}, "recaptcha_failed"),
    ],
)
def test_recaptcha_failures_are_a_clear_400_and_nothing_is_saved(client, recaptcha, verdict, code):
    recaptcha(**verdict)
    response = post_lead(client, submission(recaptchaToken="token"))
    assert response.status_code == 400
    assert response.json()["error"]["code"] == code
    assert not Lead.objects.exists() and not Job.objects.exists()


def test_a_missing_recaptcha_token_is_refused(client, recaptcha):
    response = post_lead(client, submission())
    assert response.status_code == 400 and response.json()["error"]["code"] == "recaptcha_missing"


def test_the_trusted_chat_client_skips_recaptcha_and_reports_the_visitor_ip(client, recaptcha, httpserver):
    response = post_lead(client, submission(), HTTP_X_CHAT_API_KEY=CHAT_KEY, HTTP_X_USER_IP="203.0.113.7")
    assert response.status_code == 200
    assert httpserver.log == []
    assert Lead.objects.get().client_ip == "203.0.113.7"


def test_debug_skips_recaptcha(client, recaptcha, httpserver, settings):
    settings.DEBUG = True
    assert post_lead(client, submission()).status_code == 200
    assert httpserver.log == []


def test_a_wrong_chat_key_is_refused_not_downgraded(client):
    response = post_lead(client, submission(), HTTP_X_CHAT_API_KEY="guess")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "invalid_credentials"
    assert not Lead.objects.exists()


def test_a_prototype_in_progress_blocks_parallel_requests_per_email_and_per_ip(client):
    assert post_lead(client, submission(serviceType="diagnostic")).status_code == 200
    same_email = post_lead(client, submission(serviceType="diagnostic"), REMOTE_ADDR="198.51.100.9")
    assert same_email.status_code == 429
    assert same_email.json()["error"]["code"] == "prototype_in_progress"
    assert 0 < int(same_email["Retry-After"]) <= 1200
    same_ip = post_lead(client, submission(serviceType="diagnostic", email="grace@other.example"))
    assert same_ip.status_code == 429
    assert Lead.objects.count() == 1
    other_service = post_lead(client, submission(serviceType="dedicated_team"))
    assert other_service.status_code == 200, "only prototype-eligible service types are limited"


def test_completed_prototypes_use_up_the_quota(client, settings):
    settings.LEADS_PROTOTYPE_QUOTA = 2
    for _ in range(2):
        prototype_buckets_consume(email="ada@analytical.example", ip="192.0.2.1")
    response = post_lead(client, submission(serviceType="process_automation"), REMOTE_ADDR="192.0.2.55")
    assert response.status_code == 429
    assert response.json()["error"]["code"] == "prototype_quota_exceeded"
    assert int(response["Retry-After"]) > 24 * 3600 - 60


def test_spam_does_not_keep_the_prototype_hold(client):
    post_lead(client, submission(serviceType="diagnostic", email="bot@mailinator.com"))
    assert post_lead(client, submission(serviceType="diagnostic")).status_code == 200


def test_the_public_endpoint_is_rate_limited_per_client(client, monkeypatch):
    monkeypatch.setitem(ScopedRateThrottle.THROTTLE_RATES, "leads", "2/min")
    minute_with_time_left()
    statuses = [post_lead(client, submission(email=f"user{n}@example.com")).status_code for n in range(3)]
    assert statuses == [200, 200, 429]
    blocked = post_lead(client, submission(email="late@example.com"))
    assert blocked.json()["error"]["code"] == "throttled" and int(blocked["Retry-After"]) > 0


def test_an_idempotency_key_replays_the_first_response(client):
    first = post_lead(client, submission(), HTTP_IDEMPOTENCY_KEY="form-42")
    again = post_lead(client, submission(), HTTP_IDEMPOTENCY_KEY="form-42")
    assert again.status_code == 200 and again.json() == first.json()
    assert again["Idempotent-Replayed"] == "true"
    assert Lead.objects.count() == 1 and Job.objects.filter(kind="leadgen.pipedrive_sync").count() == 1


def test_an_idempotency_key_with_another_body_is_a_422(client):
    post_lead(client, submission(), HTTP_IDEMPOTENCY_KEY="form-43")
    response = post_lead(client, submission(message="Something else"), HTTP_IDEMPOTENCY_KEY="form-43")
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "idempotency_key_reused"
    assert Lead.objects.count() == 1


def test_an_expired_idempotency_key_is_a_new_request(client, settings):
    post_lead(client, submission(), HTTP_IDEMPOTENCY_KEY="form-44")
    IdempotentRequest.objects.update(created_at=IdempotentRequest.objects.get().created_at - timedelta(hours=25))
    assert post_lead(client, submission(), HTTP_IDEMPOTENCY_KEY="form-44").status_code == 200
    assert Lead.objects.count() == 2


def lookup(client, **params):
    headers = {"HTTP_X_CHAT_API_KEY": CHAT_KEY}
    headers.update(params.pop("headers", {}))
    return client.get("/api/leads/lookup", params, **headers)


def test_lookup_needs_the_chat_key(client):
    assert client.get("/api/leads/lookup", {"email": "ada@analytical.example"}).status_code == 401


def test_lookup_finds_the_lead_and_its_rate_limit_state(client):
    post_lead(client, submission(serviceType="diagnostic"), REMOTE_ADDR="203.0.113.7")
    ChatSession.objects.create(session_id="chat-1", client_ip="203.0.113.7")
    body = lookup(client, email="ADA@analytical.example", sessionId="chat-1").json()
    lead = Lead.objects.get()
    assert body["found"] is True
    assert body["lead"]["leadId"] == str(lead.public_id) and body["lead"]["status"] == "lead"
    assert body["rateLimit"]["email"]["inProgress"] is True
    assert body["rateLimit"]["ip"]["inProgress"] is True, "IP taken from the chat session"


def test_lookup_of_an_unknown_email(client):
    body = lookup(client, email="nobody@example.com", headers={"HTTP_X_USER_IP": "192.0.2.200"}).json()
    assert body["found"] is False and body["lead"] is None
    assert body["rateLimit"]["email"] == {"inProgress": False, "used": 0, "limit": 3, "retryAfter": None}
    assert body["rateLimit"]["ip"]["inProgress"] is False


def test_lookup_validates_its_query(client):
    response = lookup(client, email="nope")
    assert response.status_code == 400 and "email" in response.json()["error"]["fields"]


def test_lookup_session_ids_are_checked_whole_and_an_empty_one_means_none(client):
    assert lookup(client, email="a@example.com", sessionId="chat-1\n").status_code == 400
    assert lookup(client, email="a@example.com", sessionId="chat 1").status_code == 400
    empty = lookup(client, email="a@example.com", sessionId="")
    assert empty.status_code == 200 and empty.json()["rateLimit"]["ip"] is None


def test_a_malformed_chat_session_header_is_a_400_even_beside_a_body_session(client):
    response = post_lead(
        client, submission(sessionId="chat-1"), HTTP_X_CHAT_API_KEY=CHAT_KEY, HTTP_X_CHAT_SESSION_ID="{}"
    )
    assert response.status_code == 400 and "X-Chat-Session-Id" in response.json()["error"]["fields"]
    assert Lead.objects.count() == 0


def test_a_malformed_visitor_ip_from_the_chat_agent_is_a_400(client):
    response = post_lead(client, submission(), HTTP_X_CHAT_API_KEY=CHAT_KEY, HTTP_X_USER_IP="~&PLjo")
    assert response.status_code == 400
    assert "X-User-IP" in response.json()["error"]["fields"]
    assert lookup(client, email="a@example.com", headers={"HTTP_X_USER_IP": "999.1.1.1"}).status_code == 400


def test_expired_idempotency_records_are_purged(client):
    post_lead(client, submission(), HTTP_IDEMPOTENCY_KEY="old")
    post_lead(client, submission(email="grace@compilers.example"), HTTP_IDEMPOTENCY_KEY="new")
    IdempotentRequest.objects.filter(key="old").update(created_at=timezone.now() - timedelta(hours=25))
    assert purge_idempotency_keys() == 1
    assert list(IdempotentRequest.objects.values_list("key", flat=True)) == ["new"]


def _dead_request_left(key: str, *, saved_lead_id: int | None = None) -> None:
    """What a web process killed mid-request leaves: its reservation row, and its connection (and so its
    advisory lock) gone. Written by a connection of its own, closed at once, as the dead process's was."""
    row = IdempotentRequest.objects.get(key=key)
    status, content = (1, str(saved_lead_id).encode()) if saved_lead_id else (0, b"")
    database = connection.settings_dict
    with psycopg.connect(
        host=database["HOST"], port=database["PORT"], user=database["USER"], dbname=database["NAME"],
        password=database["PASSWORD"] or None, autocommit=True,
    ) as dead:  # fmt: skip
        dead.execute(
            "UPDATE leadgen_idempotentrequest SET response_status = %s, response_content = %s WHERE id = %s",
            [status, content, row.pk],
        )


@pytest.mark.django_db(transaction=True)
def test_a_retry_runs_a_request_whose_process_died_before_saving_its_lead(client):
    post_lead(client, submission(), HTTP_IDEMPOTENCY_KEY="died-1")
    Lead.objects.all().delete()  # the dead request never saved it
    _dead_request_left("died-1")

    again = post_lead(client, submission(), HTTP_IDEMPOTENCY_KEY="died-1")

    assert again.status_code == 200, again.content
    assert Lead.objects.count() == 1
    assert post_lead(client, submission(), HTTP_IDEMPOTENCY_KEY="died-1")["Idempotent-Replayed"] == "true"


@pytest.mark.django_db(transaction=True)
def test_a_retry_of_a_prototype_request_that_died_holding_its_hold_gets_the_prototype(client):
    post_lead(client, submission(serviceType="diagnostic"), HTTP_IDEMPOTENCY_KEY="died-3")
    Lead.objects.all().delete()  # the dead request never saved it; the prototype hold it took stayed behind
    _dead_request_left("died-3")

    again = post_lead(client, submission(serviceType="diagnostic"), HTTP_IDEMPOTENCY_KEY="died-3")

    assert again.status_code == 200, again.content
    assert Lead.objects.get().prototype is not None
    other = post_lead(client, submission(serviceType="diagnostic"), HTTP_IDEMPOTENCY_KEY="another")
    assert other.status_code == 429 and other.json()["error"]["code"] == "prototype_in_progress"


@pytest.mark.django_db(transaction=True)
def test_a_retry_answers_with_the_lead_a_dead_request_saved_and_creates_no_second(client):
    first = post_lead(client, submission(), HTTP_IDEMPOTENCY_KEY="died-2")
    lead = Lead.objects.get()
    _dead_request_left("died-2", saved_lead_id=lead.pk)

    again = post_lead(client, submission(), HTTP_IDEMPOTENCY_KEY="died-2")

    assert again.status_code == 200 and again.json()["leadId"] == first.json()["leadId"]
    assert Lead.objects.count() == 1 and Job.objects.filter(kind="leadgen.pipedrive_sync").count() == 1
    replay = post_lead(client, submission(), HTTP_IDEMPOTENCY_KEY="died-2")
    assert replay["Idempotent-Replayed"] == "true" and replay.content == again.content


@pytest.mark.django_db(transaction=True)
def test_a_key_whose_request_is_still_running_elsewhere_is_a_409(client):
    from leadgen.idempotency import _lock_id

    post_lead(client, submission(), HTTP_IDEMPOTENCY_KEY="busy-1")
    row = IdempotentRequest.objects.get()
    IdempotentRequest.objects.filter(pk=row.pk).update(response_status=0, response_content=b"")
    database = connection.settings_dict
    with psycopg.connect(
        host=database["HOST"], port=database["PORT"], user=database["USER"], dbname=database["NAME"],
        password=database["PASSWORD"] or None, autocommit=True,
    ) as running:  # fmt: skip
        running.execute("SELECT pg_advisory_lock(%s)", [_lock_id(row.scope, row.caller, row.key)])
        busy = post_lead(client, submission(), HTTP_IDEMPOTENCY_KEY="busy-1")
    assert busy.status_code == 409 and busy.json()["error"]["code"] == "idempotency_key_in_use"
    assert Lead.objects.count() == 1
