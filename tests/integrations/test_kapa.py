"""Kapa engagement against the Kapa stand-in's agent API: owner session, paged thread list, thread details."""

from datetime import UTC, datetime, timedelta

import pytest
from django.core.exceptions import ImproperlyConfigured

from integrations.kapa.client import MAX_QUESTIONS, MAX_THREAD_DETAILS, KapaClient, client_from_settings
from integrations.kapa.competitors import competitor_rules, count_mentions
from integrations.kapa.identity import kapa_owner_id
from jobs.errors import PermanentError, TransientError
from standins.kapa import Kapa

SALT = "s3cret-salt"
SUB = "auth0|64f1c2e9"
# sha256("s3cret-salt" + "auth0|64f1c2e9"), the same in Node's createHash('sha256').update(salt + sub).digest('hex'),
# which is how the docs site mints its sessions.
OWNER_ID = "bc7b1bf601ccd5ad3f34724541f9ee06c8a2d2621e1949408592a6edd068c8af"
API_KEY = "kapa-api-key"
PROJECT = "6af273b4-8b7b-4569-b76d-0ba12ccb88bc"
SESSION_TOKEN = "NRd60UqDpLSeeIFzCfmj5dxiRDOJL8G7aSXVzpQ0pPusbe9kHIjEymznutrJu6uf"
NOW = datetime(2026, 7, 24, 12, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def owner_salt(settings):
    settings.KAPA_OWNER_SALT = SALT


def thread(number, *questions, minutes_ago):
    messages = []
    for question in questions:
        messages += [{"role": "user", "content": question}, {"role": "assistant", "content": "An answer about Kafka."}]
    return {
        "id": f"thr_{number}",
        "title": questions[0] if questions else "",
        "message_count": len(messages),
        "last_activity_at": (NOW - timedelta(minutes=minutes_ago)).isoformat().replace("+00:00", "Z"),
        "created_at": (NOW - timedelta(days=1)).isoformat(),
        "messages": messages,
    }


def kapa_client(base_url):
    return KapaClient(base_url, api_key=API_KEY, project_id=PROJECT, competitors=["Confluent", "Amazon MSK", "Kafka"])


@pytest.fixture
def client(httpserver):
    return kapa_client(httpserver.url_for("/"))


@pytest.fixture
def kapa():
    """Kapa's agent API, the owner's threads two to a page."""
    with Kapa(api_key=API_KEY, project_id=PROJECT, thread_page_size=2) as stand_in:
        yield stand_in


def test_engagement_pages_the_list_and_reads_questions_newest_first(kapa):
    kapa.threads[OWNER_ID] = [
        thread(1, "How do I migrate from Confluent Cloud?", minutes_ago=300),
        thread(2, "Is Kafka Connect supported?", "Does it run on amazon  msk?", minutes_ago=5),
        thread(3, "What does the free tier include?", minutes_ago=60),
    ]
    engagement = kapa_client(kapa.origin).fetch_engagement(SUB)
    assert engagement.thread_count == 3
    assert engagement.last_interaction_at == NOW - timedelta(minutes=5)
    assert engagement.questions == [
        "Does it run on amazon  msk?",
        "Is Kafka Connect supported?",
        "What does the free tier include?",
        "How do I migrate from Confluent Cloud?",
    ]
    # Each question is dated by its thread's last activity: Kapa dates threads, not messages.
    minutes = [5, 5, 60, 300]
    assert engagement.question_dates == [NOW - timedelta(minutes=m) for m in minutes]
    # Kafka was configured and mentioned, and still is not counted.
    assert engagement.competitor_mentions == {"Confluent": 1, "Amazon MSK": 1}


def test_only_the_most_recent_threads_are_opened(kapa):
    kapa.thread_page_size = 7
    kapa.threads[OWNER_ID] = [thread(n, f"Question {n}", minutes_ago=n) for n in range(30)]
    engagement = kapa_client(kapa.origin).fetch_engagement(SUB)
    assert engagement.thread_count == 30
    assert kapa.detail_requests == [f"thr_{n}" for n in range(MAX_THREAD_DETAILS)]
    assert engagement.questions == [f"Question {n}" for n in range(MAX_THREAD_DETAILS)]


def test_questions_stop_at_the_cap_and_so_do_detail_requests(kapa):
    kapa.threads[OWNER_ID] = [thread(n, f"Q{n}a", f"Q{n}b", f"Q{n}c", minutes_ago=n) for n in range(15)]
    engagement = kapa_client(kapa.origin).fetch_engagement(SUB)
    assert len(engagement.questions) == MAX_QUESTIONS
    assert engagement.questions[:4] == ["Q0c", "Q0b", "Q0a", "Q1c"]
    assert len(kapa.detail_requests) == 9  # 9 threads x 3 questions reach 25; the 10th is never opened


def test_a_user_without_threads(kapa):
    engagement = kapa_client(kapa.origin).fetch_engagement(SUB)
    assert (engagement.thread_count, engagement.last_interaction_at, engagement.questions) == (0, None, [])
    assert engagement.competitor_mentions == {}
    assert kapa.detail_requests == []


def test_a_repeated_page_cursor_is_permanent(httpserver, client):
    httpserver.expect_request(f"/agent/v1/projects/{PROJECT}/agent/sessions/").respond_with_json(
        {"session_token": SESSION_TOKEN}
    )
    httpserver.expect_request("/agent/v1/agent/threads/").respond_with_json(
        {"results": [{"id": "thr_1", "last_activity_at": None}], "next_cursor": "same"}
    )
    with pytest.raises(PermanentError, match="repeats a page cursor"):
        client.fetch_engagement(SUB)


def test_an_unexpected_list_shape_is_permanent(httpserver, client):
    httpserver.expect_request(f"/agent/v1/projects/{PROJECT}/agent/sessions/").respond_with_json(
        {"session_token": SESSION_TOKEN}
    )
    httpserver.expect_request("/agent/v1/agent/threads/").respond_with_json([{"id": "thr_1"}])
    with pytest.raises(PermanentError, match="unexpected threads page"):
        client.fetch_engagement(SUB)


def test_a_rejected_api_key_is_permanent(httpserver, client):
    httpserver.expect_request(f"/agent/v1/projects/{PROJECT}/agent/sessions/").respond_with_json(
        {"detail": "Invalid API key"}, status=401
    )
    with pytest.raises(PermanentError):
        client.fetch_engagement(SUB)


def test_an_outage_is_transient(httpserver, client):
    httpserver.expect_request(f"/agent/v1/projects/{PROJECT}/agent/sessions/").respond_with_json(
        {"session_token": SESSION_TOKEN}
    )
    httpserver.expect_request("/agent/v1/agent/threads/").respond_with_data("busy", status=503)
    with pytest.raises(TransientError):
        client.fetch_engagement(SUB)


# --- owner id ------------------------------------------------------------------------------


def test_owner_id_is_sha256_of_salt_then_sub():
    assert kapa_owner_id(SUB) == OWNER_ID


def test_owner_id_needs_a_salt(settings):
    settings.KAPA_OWNER_SALT = ""
    with pytest.raises(ImproperlyConfigured):
        kapa_owner_id(SUB)


# --- competitor rules ----------------------------------------------------------------------


@pytest.mark.parametrize("kafka", ["Kafka", "KAFKA", " kafka ", "Apache Kafka", "Confluent Kafka"])
def test_the_loader_refuses_kafka_in_any_form(kafka):
    assert list(competitor_rules(["Confluent", kafka, "Aiven"])) == ["Confluent", "Aiven"]


def test_blank_and_duplicate_names_are_dropped():
    assert list(competitor_rules(["", "  ", "Aiven", "aiven", "Amazon   MSK"])) == ["Aiven", "Amazon MSK"]


def test_mentions_are_whole_word_case_insensitive_once_per_question():
    rules = competitor_rules(["Confluent", "Pulsar", "Amazon MSK"])
    questions = [
        "confluent or CONFLUENT? Confluent!",  # one question, counted once
        "Is confluentinc/cp-kafka the same?",  # not a whole word
        "Pulsars are stars; Apache Pulsar is not.",
        "Moving off Amazon\nMSK next month",
        "We run Kafka everywhere",
    ]
    assert count_mentions(questions, rules) == {"Confluent": 1, "Pulsar": 1, "Amazon MSK": 1}


def test_client_from_settings_is_none_until_key_and_project_are_set(settings):
    settings.KAPA_API_KEY = ""
    settings.KAPA_PROJECT_ID = PROJECT
    assert client_from_settings() is None
    settings.KAPA_API_KEY = API_KEY
    settings.KAPA_COMPETITORS = ["Confluent", "Kafka"]
    client = client_from_settings()
    assert isinstance(client, KapaClient)
    assert list(client.competitor_rules) == ["Confluent"]
