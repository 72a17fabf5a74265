"""The real nginx, with the site deploy/render.py renders, in front of the real web processes (the launcher,
two daphne processes) and the MCP server under uvicorn, against the stand-ins of V0, the sales agent, Auth0
and Kapa: an intake, a prototype's progress stream, a chat answer and an MCP call go through it; the client's
own address is the one recorded; limits are nginx's before the web processes see a byte."""

import asyncio
import contextlib
import http.client
import json
import subprocess
import time
import uuid

import pytest
import requests

from chat.models import ChatSession
from leadgen.models import Lead
from standins import nginx
from standins.agent import Agent
from standins.auth0 import AUDIENCE, Auth0
from standins.kapa import Kapa
from standins.v0 import V0, Behaviour
from tests.conftest import free_port, subprocess_env
from tests.deploy.conftest import launcher, wait_for
from tests.docs_mcp.conftest import mcp_session, serve_mcp

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

CHAT_KEY = "chat-key-for-deploy-tests"
CLIENT = "127.0.0.2"  # the visitor: another loopback address than nginx's own, which the web processes see
FORGED = "203.0.113.66"


@pytest.fixture(scope="module")
def stand_ins():
    with (
        V0(Behaviour(parts=4, frame_interval=0.3)) as v0,
        Agent(delay=0.1) as agent,
        Auth0(audience=AUDIENCE) as auth0,
        Kapa() as kapa,
    ):
        yield {"v0": v0, "agent": agent, "auth0": auth0, "kapa": kapa}


@pytest.fixture(scope="module")
def web(django_db_setup, stand_ins, tmp_path_factory):
    env = subprocess_env(
        TRUSTED_PROXY_COUNT=1, CHAT_API_KEY=CHAT_KEY, CHAT_AGENT_URL=stand_ins["agent"].url,
        LEADS_THROTTLE_RATE="1000/min", **stand_ins["v0"].settings(),
    )  # fmt: skip
    with launcher(tmp_path_factory.mktemp("web"), env) as running:
        yield running


@pytest.fixture(scope="module")
def mcp(django_db_setup, stand_ins, make_httpserver, tmp_path_factory):
    ports = {"auth0": stand_ins["auth0"].port, "kapa": stand_ins["kapa"].port}
    yield from serve_mcp(ports, make_httpserver, tmp_path_factory, MCP_TOOL_CALLS_RATE="1000/min")


@pytest.fixture(scope="module")
def site(web, mcp, tmp_path_factory):
    """nginx in the foreground with the rendered site; its base URL."""
    prefix = tmp_path_factory.mktemp("nginx")
    static = prefix / "static"
    static.mkdir()
    (static / "site.css").write_text("body { color: teal }\n")
    port = free_port()
    command = nginx.configure(prefix, port=port, web=f"127.0.0.1:{web.port}", static_root=static,
                              mcp=mcp.removeprefix("http://"), metrics_allow="127.0.0.1")  # fmt: skip
    with (prefix / "nginx.log").open("wb") as log:
        server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: requests.get(f"{base}/healthz", timeout=2).ok, timeout=20, message="nginx")
        yield base
    finally:
        server.terminate()  # the master stops its workers
        server.wait(timeout=10)


@contextlib.contextmanager
def call(base: str, method: str, path: str, body: bytes | None = None, headers=None, source: str = CLIENT):
    """One request from `source`, on a connection of its own; its response, read as it arrives."""
    host, port = base.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=30, source_address=(source, 0))
    try:
        connection.request(method, path, body=body, headers=headers or {})
        yield connection.getresponse()
    finally:
        connection.close()


def read_events(response) -> list[tuple[float, str]]:
    """The SSE lines naming an event, each with when it arrived."""
    events = []
    while line := response.readline():
        if line.startswith(b"event: "):
            events.append((time.monotonic(), line.decode().split(": ", 1)[1].strip()))
    return events


def post_lead(base: str, service_type: str = "strategic_advice") -> str:
    """A lead through the form's API; a diagnostic one gets a prototype (one at a time per client address)."""
    body = {"firstName": "Ada", "email": f"ada-{uuid.uuid4().hex[:8]}@analytical.example", "company": "Engines",
            "message": "Our monthly reporting takes two days of copy and paste.", "serviceType": service_type}
    headers = {"Content-Type": "application/json", "X-Forwarded-For": FORGED}
    with call(base, "POST", "/api/leads", json.dumps(body).encode(), headers) as response:
        assert response.status == 200, response.read()
        return json.loads(response.read())["leadId"]


def test_an_intake_records_the_clients_own_address_and_not_the_one_it_forged(site, web):
    lead = Lead.objects.get(public_id=post_lead(site))
    assert lead.client_ip == CLIENT
    # Straight to the web process (one trusted proxy) the same header would be believed: nginx replaced it.
    assert Lead.objects.get(public_id=post_lead(web.base)).client_ip == FORGED


def test_the_prototype_stream_arrives_event_by_event(site):
    lead_id = post_lead(site, "diagnostic")
    path = f"/api/leads/{lead_id}/generate-stream"
    with call(site, "GET", path, headers={"Accept": "text/event-stream"}) as response:
        assert response.status == 200 and response.getheader("Content-Type").startswith("text/event-stream")
        events = read_events(response)
    ended = time.monotonic()
    assert events[-1][1] == "complete" and len(events) > 3
    assert ended - events[0][0] > 0.5, "the first event waited for the end of the stream"


def test_a_chat_answer_streams_token_by_token(site, stand_ins):
    body = json.dumps({"sessionId": "deploy-chat-1", "message": "Can you build us a prototype?"}).encode()
    headers = {"Content-Type": "application/json", "X-Chat-Api-Key": CHAT_KEY, "X-Forwarded-For": FORGED}
    with call(site, "POST", "/api/chat/stream", body, headers) as response:
        assert response.status == 200, response.read()
        events = read_events(response)
    names = [name for _, name in events]
    assert names.count("token") == len(stand_ins["agent"].tokens) and names[-1] == "done"
    assert events[-1][0] - events[0][0] > 0.3, "the tokens were held back until the answer ended"
    assert ChatSession.objects.get(session_id="deploy-chat-1").client_ip == CLIENT


def test_an_mcp_call_goes_to_the_mcp_server(site, stand_ins):
    async def scenario():
        async with mcp_session(site, stand_ins["auth0"].mint("auth0|ada")) as session:
            return await session.call_tool("search_docs", {"query": "enable TLS"})

    result = asyncio.run(scenario())
    assert not result.is_error and result.structured_content["result"]
    metadata = requests.get(f"{site}/.well-known/oauth-protected-resource/mcp", timeout=10)
    assert metadata.status_code == 200 and metadata.json()["resource"].endswith("/mcp")


@pytest.mark.parametrize(("path", "limit"), [("/api/leads", 64 * 1024), ("/api/chat/stream", 16 * 1024)])
def test_a_body_over_the_limit_is_refused_by_nginx(site, path, limit):
    headers = {"Content-Type": "application/json", "X-Chat-Api-Key": CHAT_KEY}
    with call(site, "POST", path, b"x" * (limit + 1), headers) as response:
        assert response.status == 413 and response.getheader("Server") == "nginx"
        assert json.loads(response.read())["error"]["code"] == "too_large"


def test_a_client_does_not_choose_the_script_prefix(site, web):
    headers = {"Daphne-Root-Path": "/elsewhere"}
    assert requests.get(f"{web.base}/elsewhere/healthz", headers=headers, timeout=10).status_code == 200
    assert requests.get(f"{site}/elsewhere/healthz", headers=headers, timeout=10).status_code == 404


def test_metrics_only_for_the_allowed_addresses(site):
    with call(site, "GET", "/metrics") as response:
        assert response.status == 403
    with call(site, "GET", "/metrics", source="127.0.0.1") as response:
        assert response.status != 403


def test_static_files_are_served_by_nginx(site):
    response = requests.get(f"{site}/static/site.css", timeout=10)
    assert response.status_code == 200 and response.text == "body { color: teal }\n"
    assert response.headers["Server"] == "nginx" and "max-age=60" in response.headers["Cache-Control"]

