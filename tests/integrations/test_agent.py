"""The agent clients against the local stand-in: one iterator of events, failures mapped as for HTTP."""

import asyncio

import pytest

from integrations.agent import client as client_module
from integrations.agent.client import AgentEvent, AgentOSClient, Timeouts, WebSocketAgentClient, client_from_settings
from jobs import PermanentError, TransientError
from standins.agent import AGENT_ID, Agent

TIMEOUTS = Timeouts(connect=1.0, first_token=1.0, total=3.0)


def collect(client):
    async def run():
        return [event async for event in client.run(query="Hi", session_id="s-1", user_ip="192.0.2.5")]

    return asyncio.run(run())


@pytest.fixture
def agent():
    with Agent() as fake:
        yield fake


def test_a_websocket_answer_is_its_deltas_then_the_completed_event(agent):
    events = collect(WebSocketAgentClient(agent.url, token="t", timeouts=TIMEOUTS))
    assert events[:-1] == [AgentEvent("token", token) for token in agent.tokens]
    assert events[-1] == AgentEvent("completed", agent.full_answer, {**agent.metadata, "run_id": "run-1"})
    assert agent.runs == [{"query": "Hi", "session_id": "s-1", "user_ip": "192.0.2.5"}]


def test_without_a_token_no_authorization_header_is_sent(agent):
    collect(WebSocketAgentClient(agent.url, timeouts=TIMEOUTS))
    assert "Authorization" not in agent.headers[0]


def test_a_dropped_websocket_is_a_transient_error_after_what_was_said(agent):
    agent.mode = "drop"
    events = []

    async def run():
        client = WebSocketAgentClient(agent.url, timeouts=TIMEOUTS)
        async for event in client.run(query="Hi", session_id="s", user_ip=None):
            events.append(event)

    with pytest.raises(TransientError, match="dropped"):
        asyncio.run(run())
    assert "".join(event.content for event in events) == agent.said_before_cut()


def test_a_run_error_ends_the_answer_with_the_agents_message(agent):
    agent.mode = "error"
    events = collect(WebSocketAgentClient(agent.url, timeouts=TIMEOUTS))
    assert events[-1] == AgentEvent("error", "model provider failed")


def test_a_stalled_websocket_times_out(agent):
    agent.mode = "stall"
    with pytest.raises(TransientError, match="timed out"):
        collect(WebSocketAgentClient(agent.url, timeouts=Timeouts(connect=1, first_token=1, total=0.5)))


@pytest.mark.parametrize(("status", "error"), [(401, PermanentError), (403, PermanentError), (503, TransientError)])
def test_a_refused_handshake_maps_like_http(status, error):
    with Agent(reject_status=status) as fake, pytest.raises(error, match=str(status)):
        collect(WebSocketAgentClient(fake.url, timeouts=TIMEOUTS))


def test_an_agentos_run_is_read_from_its_sse_frames():
    with Agent(token="t") as fake:
        events = collect(AgentOSClient(fake.agentos_url, agent_id=AGENT_ID, token="t", timeouts=TIMEOUTS))
    assert "".join(event.content for event in events[:-1]) == fake.full_answer
    assert events[-1].kind == "completed" and events[-1].content == fake.full_answer
    assert fake.runs[0] == {"message": "Hi", "stream": "true", "session_id": "s-1", "user_id": "192.0.2.5"}


@pytest.mark.parametrize(("status", "error"), [(404, PermanentError), (429, TransientError), (502, TransientError)])
def test_agentos_statuses_map_like_http(status, error):
    with Agent(reject_status=status) as fake, pytest.raises(error, match=str(status)):
        collect(AgentOSClient(fake.agentos_url, agent_id=AGENT_ID, timeouts=TIMEOUTS))


def test_agentos_cut_short_is_a_transient_error(agent):
    agent.mode = "drop"
    with pytest.raises(TransientError):
        collect(AgentOSClient(agent.agentos_url, agent_id=AGENT_ID, timeouts=TIMEOUTS))


def test_the_url_scheme_picks_the_transport(settings):
    settings.CHAT_AGENT_URL = ""
    assert client_from_settings() is None
    settings.CHAT_AGENT_URL = "wss://agent.example.com/ws"
    assert isinstance(client_from_settings(), WebSocketAgentClient)
    settings.CHAT_AGENT_URL, settings.CHAT_AGENT_ID = "https://os.example.com/", "sales"
    client = client_from_settings()
    assert isinstance(client, AgentOSClient) and client.url == "https://os.example.com/agents/sales/runs"
    settings.CHAT_AGENT_URL = "ftp://agent.example.com"
    with pytest.raises(ValueError):
        client_from_settings()


def test_an_agentos_answer_that_is_not_an_event_stream_is_permanent(httpserver):
    httpserver.expect_request(f"/agents/{AGENT_ID}/runs", method="POST").respond_with_json({"content": "Hi"})
    client = AgentOSClient(httpserver.url_for("/"), agent_id=AGENT_ID, timeouts=TIMEOUTS)
    with pytest.raises(PermanentError, match="not an event stream"):
        collect(client)


def test_a_websocket_frame_over_the_bound_is_a_dropped_connection(agent, monkeypatch):
    monkeypatch.setattr(client_module, "MAX_FRAME_BYTES", 64)  # the stand-in's RunStarted is longer
    with pytest.raises(TransientError, match="dropped"):
        collect(WebSocketAgentClient(agent.url, timeouts=TIMEOUTS))


def test_an_agentos_frame_over_the_bound_is_permanent(agent, monkeypatch):
    monkeypatch.setattr(client_module, "MAX_FRAME_BYTES", 64)
    with pytest.raises(PermanentError, match="too large"):
        collect(AgentOSClient(agent.agentos_url, agent_id=AGENT_ID, timeouts=TIMEOUTS))
