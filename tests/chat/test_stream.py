"""POST /api/chat/stream through the ASGI application daphne serves, against local fake agents."""

import pytest
import requests

from chat.models import ChatMessage, ChatSession
from tests.chat.conftest import CHAT_KEY, SESSION, chat_request
from tests.conftest import free_port, minute_with_time_left, subprocess_env, web_process

pytestmark = pytest.mark.django_db(transaction=True)

QUESTION = {"sessionId": SESSION, "message": "Can you build us a prototype?"}


def messages():
    return list(ChatMessage.objects.order_by("id").values_list("role", "content", "state"))


def test_the_answer_streams_token_by_token_and_both_messages_are_saved(fake_agent):
    fake_agent.delay = 0.05
    result = chat_request(QUESTION, headers={"X-User-IP": "198.51.100.7"})

    assert result.status == 200
    assert result.headers["content-type"] == "text/event-stream"
    assert result.named("token") == [{"content": token} for token in fake_agent.tokens]
    times = [at for name, _, at in result.events]
    assert times[-1] - times[0] > 0.2, "tokens are sent as they arrive, not all at the end"
    (done,) = result.named("done")
    assert done["content"] == fake_agent.full_answer and done["state"] == "complete"
    assert [name for name, _, _ in result.events][-1] == "done"

    assert messages() == [
        ("user", QUESTION["message"], "complete"),
        ("assistant", fake_agent.full_answer, "complete"),
    ]
    answer = ChatMessage.objects.get(role="assistant")
    assert answer.pk == done["messageId"]
    assert answer.metadata == {"intent": "prototype", "lead_created": False, "run_id": "run-1"}
    session = ChatSession.objects.get()
    assert (session.session_id, session.client_ip) == (SESSION, "198.51.100.7")
    assert fake_agent.runs == [{"query": QUESTION["message"], "session_id": SESSION, "user_ip": "198.51.100.7"}]
    assert fake_agent.headers[0]["Authorization"] == "Bearer agent-token"


def test_a_visitor_who_leaves_mid_answer_still_gets_the_whole_answer_saved(fake_agent):
    fake_agent.delay = 0.05
    result = chat_request(QUESTION, leave_after_tokens=2)

    assert 2 <= len(result.named("token")) < len(fake_agent.tokens)
    assert result.named("done") == []
    assert messages()[-1] == ("assistant", fake_agent.full_answer, "complete")


def test_an_agent_that_drops_mid_answer_leaves_a_partial_answer_and_an_error(fake_agent):
    fake_agent.mode = "drop"
    result = chat_request(QUESTION)

    assert result.text == fake_agent.said_before_cut()
    (error,) = result.named("error")
    assert error["state"] == "partial" and error["code"] == "agent_unavailable" and error["message"]
    assert messages()[-1] == ("assistant", fake_agent.said_before_cut(), "partial")


def test_an_agent_error_event_is_an_error_for_the_visitor(fake_agent):
    fake_agent.mode, fake_agent.cut_after = "error", 0
    result = chat_request(QUESTION)

    assert result.named("error")[0]["state"] == "failed"
    answer = ChatMessage.objects.get(role="assistant")
    assert (answer.state, answer.content) == ("failed", "")
    assert answer.metadata["error"] == {"code": "agent_error", "detail": "model provider failed"}


def test_an_agent_that_never_answers_times_out_at_the_first_token(fake_agent, settings):
    settings.CHAT_AGENT_CONNECT_TIMEOUT_SECONDS = settings.CHAT_AGENT_FIRST_TOKEN_TIMEOUT_SECONDS = 0.5
    fake_agent.mode, fake_agent.cut_after = "stall", 0
    result = chat_request(QUESTION)

    assert result.named("error")[0]["state"] == "failed"
    assert result.events[-1][2] < 2.0
    assert messages()[-1] == ("assistant", "", "failed")


def test_an_agent_that_stalls_mid_answer_is_cut_at_the_total_timeout(fake_agent, settings):
    settings.CHAT_AGENT_TIMEOUT_SECONDS = 1.0
    fake_agent.mode = "stall"
    result = chat_request(QUESTION)

    assert result.named("error")[0]["state"] == "partial"
    assert 0.9 < result.events[-1][2] < 2.5
    assert messages()[-1] == ("assistant", fake_agent.said_before_cut(), "partial")


def test_an_unreachable_agent_is_an_error_with_the_question_kept(settings):
    from tests.conftest import free_port

    settings.CHAT_AGENT_URL = f"ws://127.0.0.1:{free_port()}/agent"
    result = chat_request(QUESTION)

    assert result.named("error")[0]["code"] == "agent_unavailable"
    assert messages() == [("user", QUESTION["message"], "complete"), ("assistant", "", "failed")]


@pytest.mark.parametrize("key", [None, "", "wrong-key", CHAT_KEY + "x"])
def test_without_the_right_key_nothing_is_saved(fake_agent, key):
    result = chat_request(QUESTION, key=key)

    assert result.status == 401
    assert result.json()["error"]["code"] == "invalid_credentials"
    assert not ChatSession.objects.exists() and not ChatMessage.objects.exists()
    assert fake_agent.runs == []


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        ({"sessionId": SESSION}, {"message"}),
        ({"sessionId": SESSION, "message": "   "}, {"message"}),
        ({"sessionId": SESSION, "message": "x" * 4001}, {"message"}),
        ({"sessionId": "has spaces", "message": "hi"}, {"sessionId"}),
        ({"sessionId": "s" * 129, "message": "hi"}, {"sessionId"}),
        ({"sessionId": 42, "message": ["hi"]}, {"sessionId", "message"}),
        ([1, 2], {"non_field_errors"}),
    ],
)
def test_bad_input_is_a_400_per_field_and_nothing_is_saved(fake_agent, body, fields):
    result = chat_request(body)

    assert result.status == 400
    assert set(result.json()["error"]["fields"]) == fields
    assert not ChatMessage.objects.exists()


def test_broken_json_oversized_bodies_and_bad_ips_are_refused(fake_agent, settings):
    assert chat_request(b"{not json").status == 400
    assert chat_request(b"[" * 5_000 + b"]" * 5_000).status == 400  # deeper than the parser goes, within the size
    settings.CHAT_MAX_BODY_BYTES = 100
    assert chat_request({**QUESTION, "message": "x" * 200}).status == 413
    settings.CHAT_MAX_BODY_BYTES = 16 * 1024
    bad_ip = chat_request(QUESTION, headers={"X-User-IP": "not-an-ip"})
    assert bad_ip.status == 400 and "X-User-IP" in bad_ip.json()["error"]["fields"]
    assert not ChatMessage.objects.exists()


def test_without_an_agent_configured_the_stream_says_so(settings):
    settings.CHAT_AGENT_URL = ""
    result = chat_request(QUESTION)
    assert result.status == 503
    assert result.json()["error"]["code"] == "not_configured"


def test_messages_are_limited_per_session_and_per_ip(fake_agent, settings):
    settings.CHAT_STREAM_RATE_PER_SESSION = "2/min"
    minute_with_time_left()
    ip = {"X-User-IP": "198.51.100.20"}
    assert [chat_request(QUESTION, headers=ip).status for _ in range(3)] == [200, 200, 429]
    settings.CHAT_STREAM_RATE_PER_SESSION, settings.CHAT_STREAM_RATE_PER_IP = "100/min", "3/min"
    other = {**QUESTION, "sessionId": "another-session"}
    statuses = [chat_request(other, headers=ip).status for _ in range(2)]
    assert statuses == [200, 429], "the IP's allowance counts the first session's messages too"
    throttled = chat_request(other, headers={"X-User-IP": "198.51.100.21"})
    assert throttled.status == 200, "another visitor is not held back"
    assert ChatMessage.objects.filter(role="user").count() == 4


def test_the_widget_token_opens_its_own_session_only_and_its_ip_comes_from_the_connection(fake_agent):
    from chat.api import widget_token_issue

    token = widget_token_issue(SESSION)
    own = chat_request(QUESTION, key=None, headers={"X-Chat-Widget-Token": token, "X-User-IP": "198.51.100.7"})
    assert own.status == 200 and own.named("done")
    assert ChatSession.objects.get().client_ip == "203.0.113.9", "X-User-IP is honoured only with the chat key"

    other = chat_request({**QUESTION, "sessionId": "someone-else"}, key=None, headers={"X-Chat-Widget-Token": token})
    assert other.status == 401
    assert not ChatSession.objects.filter(session_id="someone-else").exists()


# --- the same relay in front of a stock AgentOS --------------------------------------------------


def test_agentos_answers_stream_through_the_same_relay(fake_agentos):
    fake_agentos.delay = 0.05
    result = chat_request(QUESTION, headers={"X-User-IP": "198.51.100.7"})

    assert result.named("token") == [{"content": token} for token in fake_agentos.tokens]
    assert result.events[-1][2] - result.events[0][2] > 0.2
    assert result.named("done")[0]["content"] == fake_agentos.full_answer
    assert fake_agentos.runs == [
        {"message": QUESTION["message"], "stream": "true", "session_id": SESSION, "user_id": "198.51.100.7"}
    ]
    assert fake_agentos.headers[0]["Authorization"] == "Bearer agent-token"
    assert messages()[-1] == ("assistant", fake_agentos.full_answer, "complete")


def test_agentos_dropping_mid_answer_leaves_a_partial_answer(fake_agentos):
    fake_agentos.mode = "drop"
    result = chat_request(QUESTION)
    assert result.text == fake_agentos.said_before_cut()
    assert result.named("error")[0]["state"] == "partial"
    assert messages()[-1] == ("assistant", fake_agentos.said_before_cut(), "partial")


def test_agentos_errors_and_stalls_end_the_answer(fake_agentos, settings):
    fake_agentos.mode = "error"
    assert chat_request(QUESTION).named("error")[0]["state"] == "partial"
    settings.CHAT_AGENT_TIMEOUT_SECONDS = 1.0
    fake_agentos.mode = "stall"
    stalled = chat_request(QUESTION)
    assert stalled.named("error")[0]["state"] == "partial" and stalled.events[-1][2] < 2.5
    assert [state for _, _, state in messages()] == ["complete", "partial", "complete", "partial"]


def test_a_visitor_who_leaves_an_agentos_answer_still_gets_it_saved(fake_agentos):
    fake_agentos.delay = 0.05
    result = chat_request(QUESTION, leave_after_tokens=1)
    assert not result.named("done")
    assert messages()[-1] == ("assistant", fake_agentos.full_answer, "complete")


def test_agentos_refusing_the_run_is_an_error(fake_agentos):
    fake_agentos.token = "another-token"
    result = chat_request(QUESTION)
    assert result.named("error")[0] == {
        "code": "agent_unavailable",
        "message": result.named("error")[0]["message"],
        "messageId": ChatMessage.objects.get(role="assistant").pk,
        "state": "failed",
    }


def test_an_answer_that_runs_on_is_cut_and_kept_as_partial(fake_agent, monkeypatch):
    from chat import relay

    monkeypatch.setattr(relay, "MAX_ANSWER_CHARS", 20)  # the bound, made small enough to reach in a test
    result = chat_request(QUESTION)

    kept = ChatMessage.objects.get(role="assistant")
    assert kept.state == "partial" and 0 < len(kept.content) <= 20
    assert result.text == kept.content and result.named("error")[0]["code"] == "answer_too_long"


def test_a_database_outage_is_a_503_to_come_back_to_not_a_500(fake_agent, tmp_path):
    """daphne on a database nobody listens on: the message is refused with database_unavailable and Retry-After."""
    env = subprocess_env(
        DATABASE_URL=f"postgres://nobody:nothing@127.0.0.1:{free_port()}/gone", DATABASE_POOL_TIMEOUT=1,
        CHAT_API_KEY=CHAT_KEY, CHAT_AGENT_URL=fake_agent.url, CHAT_AGENT_TOKEN="agent-token", LOG_LEVEL="WARNING",
    )  # fmt: skip
    log = tmp_path / "daphne.log"
    with log.open("wb") as out, web_process(env, server="daphne", stdout=out, stderr=out) as (_, port):
        response = requests.post(f"http://127.0.0.1:{port}/api/chat/stream", json=QUESTION,
                                 headers={"X-Chat-Api-Key": CHAT_KEY}, timeout=30)  # fmt: skip
    assert response.status_code == 503, response.content
    assert response.json()["error"]["code"] == "database_unavailable"
    assert int(response.headers["Retry-After"]) > 0
    assert not any(run.get("query") for run in fake_agent.runs), "connected while saving, but never asked"
