"""The relay's own machinery: chats starting and ending together share their writes, the agent is connected to
while the question is saved and asked only once it is, the rate limits and caps in one round trip to Redis, the
SSE frames and the keepalive."""

import asyncio
import json
import time

import pytest

from chat import relay, services
from chat.models import ChatMessage, ChatSession
from integrations.agent.client import AgentEvent, Timeouts, WebSocketAgentClient
from tests.chat.conftest import CHAT_KEY, chat_call, chat_request
from tests.conftest import free_port

pytestmark = pytest.mark.django_db(transaction=True)


def test_chats_at_once_each_get_their_own_answer_and_both_messages_saved(fake_agent):
    fake_agent.delay = 0.01
    sessions = [f"together-{n}" for n in range(12)] + ["together-0", "together-1"]  # two sessions ask twice

    async def everyone():
        results = await asyncio.gather(
            *(chat_call({"sessionId": session, "message": f"Question {n}"}) for n, session in enumerate(sessions))
        )
        await relay.relays_finish(10)
        return results

    results = asyncio.run(everyone())

    assert [result.status for result in results] == [200] * len(sessions)
    for n, (session, result) in enumerate(zip(sessions, results, strict=True)):
        (done,) = result.named("done")
        assert result.text == done["content"] == fake_agent.full_answer
        answer = ChatMessage.objects.get(pk=done["messageId"])
        assert (answer.session.session_id, answer.role, answer.state) == (session, "assistant", "complete")
        assert ChatMessage.objects.filter(session=answer.session, role="user", content=f"Question {n}").exists()
    assert ChatSession.objects.count() == 12
    assert ChatMessage.objects.filter(role="user").count() == ChatMessage.objects.filter(role="assistant").count() == 14
    asked = sorted((run["session_id"], run["query"]) for run in fake_agent.runs)
    assert asked == sorted((session, f"Question {n}") for n, session in enumerate(sessions))


def test_turns_and_answers_are_saved_in_one_batch_each():
    first = services.chat_turns_start(
        [services.Turn("batch-a", "192.0.2.1", "Hello"), services.Turn("batch-b", None, "Hi")]
    )
    again = services.chat_turns_start([services.Turn("batch-b", "192.0.2.2", "Still there?")])
    assert [(m.session.session_id, m.role, m.content, m.state) for m in first + again] == [
        ("batch-a", "user", "Hello", "complete"),
        ("batch-b", "user", "Hi", "complete"),
        ("batch-b", "user", "Still there?", "complete"),
    ]
    assert ChatMessage.objects.get(pk=again[0].pk).created_at == again[0].created_at
    assert dict(ChatSession.objects.values_list("session_id", "client_ip")) == {
        "batch-a": "192.0.2.1",
        "batch-b": "192.0.2.2",
    }
    assert again[0].session_id == first[1].session_id, "the same session, upserted"

    session_pk = first[1].session_id
    answers = services.chat_answers_save(
        [
            services.Answer(session_pk, "One", {"run_id": "r-1"}, "complete"),
            services.Answer(first[0].session_id, "", {"error": {"code": "agent_error"}}, "failed"),
            services.Answer(session_pk, "Two", {"blob": "x" * services.MAX_METADATA_BYTES}, "partial"),
        ]
    )
    saved = ChatMessage.objects.filter(role="assistant").order_by("id")
    assert [a.pk for a in answers] == [m.pk for m in saved]
    assert [(m.session_id, m.content, m.metadata, m.state) for m in saved] == [
        (session_pk, "One", {"run_id": "r-1"}, "complete"),
        (first[0].session_id, "", {"error": {"code": "agent_error"}}, "failed"),
        (session_pk, "Two", {"truncated": True}, "partial"),
    ]


def test_the_agent_is_connected_to_while_the_question_is_saved_and_asked_once_it_is(fake_agent):
    client = WebSocketAgentClient(fake_agent.url, timeouts=Timeouts(connect=2.0, first_token=2.0, total=5.0))

    async def run(saved):
        events = client.run(query="Hi", session_id="s-1", user_ip=None, after=saved)
        first = asyncio.ensure_future(anext(events))
        while not fake_agent.headers:  # connected...
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)
        asked_before = list(fake_agent.runs)  # ...but not asked
        saved.set_result(None)
        return asked_before, [await first] + [event async for event in events]

    async def saved_then_run():
        return await run(asyncio.get_running_loop().create_future())

    asked_before, events = asyncio.run(saved_then_run())
    assert asked_before == []
    assert events[0] == AgentEvent("token", fake_agent.tokens[0]) and events[-1].kind == "completed"
    assert fake_agent.runs == [{"query": "Hi", "session_id": "s-1", "user_ip": None}]

    async def not_saved():
        failed = asyncio.get_running_loop().create_future()
        failed.set_exception(RuntimeError("the database is down"))
        return [event async for event in client.run(query="Hi", session_id="s-2", user_ip=None, after=failed)]

    with pytest.raises(RuntimeError):
        asyncio.run(not_saved())
    for _ in range(200):  # the stand-in notes the closed connection as a run of nothing, in its own thread
        if len(fake_agent.runs) == 2:
            break
        time.sleep(0.01)
    assert [run.get("query") for run in fake_agent.runs] == ["Hi", None], "the second connection was never asked"


def test_when_redis_cannot_be_reached_the_message_goes_through_unlimited(fake_agent, settings, caplog):
    settings.CHAT_STREAM_RATE_PER_SESSION = "1/min"
    settings.CACHES = {"default": {**settings.CACHES["default"], "LOCATION": f"redis://127.0.0.1:{free_port()}/0"}}
    results = [chat_request({"sessionId": "no-redis", "message": "Hello?"}) for _ in range(2)]
    assert [(result.status, result.text) for result in results] == [(200, fake_agent.full_answer)] * 2
    assert "throttle_unavailable" in caplog.text and "no-redis" not in caplog.text


def test_a_spent_allowance_says_when_to_come_back_and_counts_nothing_else(fake_agent, settings):
    settings.CHAT_STREAM_RATE_PER_SESSION, settings.CHAT_STREAM_RATE_PER_IP = "1/hour", "2/hour"
    ip = {"X-User-IP": "198.51.100.30"}
    first, second = (chat_request({"sessionId": "spent", "message": "Hi"}, headers=ip) for _ in range(2))
    assert (first.status, second.status) == (200, 429)
    assert 0 < int(second.headers["retry-after"]) <= 3600
    assert second.json()["error"]["code"] == "throttled"
    assert chat_request({"sessionId": "other", "message": "Hi"}, headers=ip).status == 200, "the IP counted once"


def test_a_quiet_stream_gets_a_keepalive_and_token_frames_are_compact_json(fake_agent, settings, monkeypatch):
    monkeypatch.setattr(relay, "KEEPALIVE_SECONDS", 0.2)
    settings.CHAT_AGENT_TIMEOUT_SECONDS = 1.0
    fake_agent.mode = "stall"
    result = chat_request({"sessionId": "quiet", "message": "Hello?"}, key=CHAT_KEY)
    assert result.body.count(b": keepalive\n\n") >= 3, result.body
    assert result.named("error")[0]["state"] == "partial"

    for text in ["plain", 'quote " and \\ back', "line\nbreak", "émoji 🙂 and \u2028", "\x00\x1f"]:
        data = json.dumps({"content": text}, separators=(",", ":"))
        assert relay._token_frame(text) == f"event: token\ndata: {data}\n\n".encode()
