"""The docs MCP server end to end: the SDK's client over HTTP to daphne, Auth0 tokens, Kapa and the docs site faked."""

import asyncio
import hashlib
import json
import time

import pytest
import requests
from django.db import connection
from joserfc.jwk import RSAKey

from docs_users import sync
from docs_users.models import TrackedUser
from jobs import runtime as job_runtime
from standins.auth0 import AUDIENCE
from standins.kapa import API_KEY, PROJECT
from tests.conftest import free_port
from tests.docs_mcp.conftest import OWNER_SALT, mcp_session
from tests.tracking.support import run_jobs

pytestmark = pytest.mark.django_db(transaction=True)

TOOLS = {"search_docs", "ask_docs", "get_page"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "curl", "version": "1"}},
}


def run(scenario):
    return asyncio.run(scenario)


def text_of(result) -> str:
    return "".join(block.text for block in result.content if block.type == "text")


def test_every_tool_advertises_the_optional_context(mcp_server, auth0):
    async def scenario():
        async with mcp_session(mcp_server, auth0.mint("auth0|ada")) as session:
            return (await session.list_tools()).tools

    tools = run(scenario())
    assert {tool.name for tool in tools} == TOOLS
    for tool in tools:
        context = tool.input_schema["properties"]["context"]
        assert "never include secrets" in context["description"].lower()
        assert "context" not in tool.input_schema.get("required", [])
        assert "ctx" not in tool.input_schema["properties"] and "caller" not in tool.input_schema["properties"]


def test_search_with_and_without_context_is_recorded_and_context_never_reaches_kapa(mcp_server, auth0, kapa):
    intent = "The user asks how to enable TLS on a cluster. " * 20  # 940 characters: stored capped

    async def scenario():
        async with mcp_session(mcp_server, auth0.mint("auth0|ada"), client_name="claude-code") as session:
            with_context = await session.call_tool("search_docs", {"query": "enable TLS", "context": intent})
            without = await session.call_tool("search_docs", {"query": "rotate certificates"})
            return with_context, without

    with_context, without = run(scenario())
    assert not with_context.is_error and not without.is_error
    hits = with_context.structured_content["result"]
    assert len(hits) == 5
    assert hits[0]["title"] == "Result 1 for enable TLS" and hits[0]["url"] == "https://docs.example.com/page-1"
    assert len(hits[0]["snippet"]) == 500
    assert "Passage 1 about enable TLS." in hits[0]["snippet"] and "# Docs" not in hits[0]["snippet"]
    assert kapa.bodies() == [{"query": "enable TLS", "top_k": 5}, {"query": "rotate certificates", "top_k": 5}]
    assert "TLS on a cluster" not in json.dumps(kapa.bodies())

    user = TrackedUser.objects.get(sub="auth0|ada")
    assert user.mcp_tool_counts == {"search_docs": 2}
    assert user.mcp_last_tool_at is not None and user.is_pending
    assert [entry["context"] for entry in user.mcp_agent_intents] == [intent.strip()[:500]]
    assert user.mcp_agent_intents[0]["tool"] == "search_docs"
    # The session's initialize was the sign-in; the client is the one named in clientInfo.
    assert user.last_channel == "mcp" and user.last_sign_in_at is not None
    assert user.mcp_client == "Claude Code"


def test_ask_docs_asks_in_a_thread_of_the_users_own(mcp_server, auth0, kapa):
    async def scenario():
        async with mcp_session(mcp_server, auth0.mint("auth0|grace"), client_name="cursor-vscode") as session:
            return await session.call_tool(
                "ask_docs", {"question": "How do I enable TLS?", "context": "setting up a secure cluster"}
            )

    result = run(scenario())
    assert not result.is_error, text_of(result)
    assert result.structured_content == {
        "answer": "To how do i enable tls?, set the option.",
        "uncertain": False,
        "sources": [{"title": "Configuration", "url": "https://docs.example.com/config"}],
    }
    # The thread is the user's in Kapa, under the owner id the docs site uses; the sub never reaches Kapa.
    owner = hashlib.sha256((OWNER_SALT + "auth0|grace").encode()).hexdigest()
    assert kapa.questions == [(owner, "How do I enable TLS?")]
    assert kapa.bodies() == [{"query": "How do I enable TLS?", "user": {"unique_client_id": owner}}]
    user = TrackedUser.objects.get(sub="auth0|grace")
    assert user.mcp_tool_counts == {"ask_docs": 1} and user.is_pending
    assert user.mcp_client == "Cursor"
    # Kapa keeps Chat threads apart from the ones the daily engagement fetch lists: the thread is recorded here.
    assert user.kapa_asked_thread_count == 1
    [asked] = user.kapa_asked_questions
    assert (asked["thread_id"], asked["question"]) == (kapa.thread_ids[0], "How do I enable TLS?")
    assert "secure cluster" not in json.dumps(user.kapa_asked_questions)


def test_ask_docs_questions_feed_the_daily_kapa_engagement(mcp_server, auth0, kapa, httpserver, settings):
    """Asked through the MCP server, then the daily sync: the profile's Kapa engagement counts the threads."""
    settings.KAPA_API_URL = httpserver.url_for("/")
    settings.KAPA_API_KEY, settings.KAPA_PROJECT_ID, settings.KAPA_OWNER_SALT = API_KEY, PROJECT, OWNER_SALT
    owner = hashlib.sha256((OWNER_SALT + "auth0|linus").encode()).hexdigest()
    httpserver.expect_request(
        f"/agent/v1/projects/{PROJECT}/agent/sessions/", method="POST", json={"external_owner_id": owner}
    ).respond_with_json({"session_token": "session-1", "expires_at": "2026-12-01T19:00:00Z"})
    httpserver.expect_request("/agent/v1/agent/threads/", method="GET").respond_with_json(
        {"results": [], "next_cursor": None}
    )

    async def scenario():
        async with mcp_session(mcp_server, auth0.mint("auth0|linus")) as session:
            for question in ("How do I enable TLS?", "Can I mail kim@acme.com the logs?"):
                result = await session.call_tool("ask_docs", {"question": question})
                assert not result.is_error, text_of(result)

    run(scenario())
    sync.profile_sync_start(reason="test")
    run_jobs(sync.SYNC_KIND)
    user = TrackedUser.objects.get(sub="auth0|linus")
    assert user.kapa_thread_count == 2
    assert user.kapa_questions == ["Can I mail [EMAIL] the logs?", "How do I enable TLS?"]
    assert user.kapa_last_interaction_at is not None and user.kapa_refreshed_at is not None


def test_kapa_refusing_is_a_tool_error_the_agent_can_read(mcp_server, auth0, kapa):
    """Kapa's throttle (429, Retry-After) and a refused key (401) as Kapa answers them: tool errors, calls recorded."""
    kapa.fail_next(
        429, {"detail": "Request was throttled. Expected available in 3 seconds."}, headers={"Retry-After": "3"}
    )
    kapa.fail_next(401, {"detail": "Invalid API key."})

    async def scenario():
        async with mcp_session(mcp_server, auth0.mint("auth0|ada")) as session:
            search = await session.call_tool("search_docs", {"query": "tls"})
            ask = await session.call_tool("ask_docs", {"question": "How?"})
            return search, ask

    search, ask = run(scenario())
    for result in (search, ask):
        assert result.is_error and "unavailable right now; try again shortly" in text_of(result)
        assert "Invalid API key" not in text_of(result) and "throttled" not in text_of(result)
    assert TrackedUser.objects.get(sub="auth0|ada").mcp_tool_counts == {"search_docs": 1, "ask_docs": 1}


def test_get_page_reads_docs_pages_only(mcp_server, auth0, docs_site, httpserver):
    async def scenario():
        async with mcp_session(mcp_server, auth0.mint("auth0|ada")) as session:
            page = await session.call_tool("get_page", {"url": f"{docs_site}/docs/old-tls", "context": "reading up"})
            metadata = await session.call_tool("get_page", {"url": "http://169.254.169.254/latest/meta-data/"})
            away = await session.call_tool("get_page", {"url": f"{docs_site}/docs/away"})
            return page, metadata, away

    page, metadata, away = run(scenario())
    assert not page.is_error, text_of(page)
    assert page.structured_content["title"] == "Enable TLS | Docs"
    assert page.structured_content["url"] == f"{docs_site}/docs/tls"
    assert "Set tls.enabled to true." in page.structured_content["text"]
    assert "track()" not in page.structured_content["text"] and "color:red" not in page.structured_content["text"]
    assert metadata.is_error and "only pages of the documentation site" in text_of(metadata)
    assert away.is_error and "only pages of the documentation site" in text_of(away)
    assert all(b"reading up" not in request.get_data() for request, _ in httpserver.log)
    assert TrackedUser.objects.get(sub="auth0|ada").mcp_tool_counts == {"get_page": 3}


def test_a_context_that_is_not_a_string_is_refused_by_validation(mcp_server, auth0, kapa):
    async def scenario():
        async with mcp_session(mcp_server, auth0.mint("auth0|ada")) as session:
            return await session.call_tool("search_docs", {"query": "tls", "context": {"secret": "x"}})

    result = run(scenario())
    assert result.is_error and "context" in text_of(result)
    assert kapa.requests == []


def test_two_users_usage_is_kept_apart(mcp_server, auth0, kapa):
    async def scenario():
        async with (
            mcp_session(mcp_server, auth0.mint("auth0|ada")) as ada,
            mcp_session(mcp_server, auth0.mint("auth0|alan"), client_name="", user_agent="goose/1.2") as alan,
        ):
            await asyncio.gather(
                ada.call_tool("search_docs", {"query": "a", "context": "ada's reason"}),
                alan.call_tool("search_docs", {"query": "b", "context": "alan's reason"}),
                alan.call_tool("ask_docs", {"question": "b?"}),
            )

    run(scenario())
    ada, alan = TrackedUser.objects.get(sub="auth0|ada"), TrackedUser.objects.get(sub="auth0|alan")
    assert ada.mcp_tool_counts == {"search_docs": 1}
    assert [entry["context"] for entry in ada.mcp_agent_intents] == ["ada's reason"]
    assert alan.mcp_tool_counts == {"search_docs": 1, "ask_docs": 1}
    assert [entry["context"] for entry in alan.mcp_agent_intents] == ["alan's reason"]
    assert alan.mcp_client == "Goose"


def test_a_call_whose_client_leaves_before_the_answer_is_recorded(mcp_server, auth0, kapa):
    kapa.retrieval_seconds = 1.5
    headers = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {auth0.mint('auth0|ada')}"}
    initialized = requests.post(f"{mcp_server}/mcp", json=INITIALIZE, headers=headers, timeout=10)
    headers["Mcp-Session-Id"] = initialized.headers["Mcp-Session-Id"]
    requests.post(f"{mcp_server}/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                  headers=headers, timeout=10)  # fmt: skip
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "search_docs", "arguments": {"query": "tls", "context": "leaving early"}}}  # fmt: skip
    with pytest.raises(requests.Timeout):
        requests.post(f"{mcp_server}/mcp", json=call, headers=headers, timeout=0.3)
    deadline = time.monotonic() + 10
    while not TrackedUser.objects.filter(sub="auth0|ada", mcp_tool_counts__search_docs=1).exists():
        assert time.monotonic() < deadline, "the call was not recorded"
        time.sleep(0.1)
    ada = TrackedUser.objects.get(sub="auth0|ada")
    assert [intent["context"] for intent in ada.mcp_agent_intents] == ["leaving early"]


def test_a_recording_failure_does_not_fail_the_call(mcp_server, auth0, kapa):
    table = TrackedUser._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(f"ALTER TABLE {table} RENAME TO {table}_away")
    try:

        async def scenario():
            async with mcp_session(mcp_server, auth0.mint("auth0|ada")) as session:
                search = await session.call_tool("search_docs", {"query": "tls", "context": "why"})
                ask = await session.call_tool("ask_docs", {"question": "How do I enable TLS?"})
                return search, ask

        result, ask = run(scenario())
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"ALTER TABLE {table}_away RENAME TO {table}")
    assert not result.is_error
    assert result.structured_content["result"][0]["title"] == "Result 1 for tls"
    # Neither the tool call nor the asked question could be recorded: the answer still comes back.
    assert not ask.is_error and ask.structured_content["answer"] == "To how do i enable tls?, set the option."
    assert not TrackedUser.objects.filter(sub="auth0|ada").exists()


@pytest.mark.parametrize(
    "case",
    ["no token", "expired", "wrong audience", "wrong issuer", "another key", "no subject", "not a token"],
)
def test_a_missing_or_bad_token_is_401_with_the_resource_metadata(mcp_server, auth0, kapa, case):
    tokens = {
        "no token": None,
        "expired": lambda: auth0.mint("auth0|ada", iat=1_700_000_000, exp=1_700_003_600),
        "wrong audience": lambda: auth0.mint("auth0|ada", aud="https://api.other.example.com/"),
        "wrong issuer": lambda: auth0.mint("auth0|ada", iss="https://evil.example.com/"),
        "another key": lambda: auth0.mint(
            "auth0|ada", key=RSAKey.generate_key(2048, parameters={"kid": "tenant-key-1"})
        ),
        "no subject": lambda: auth0.mint("auth0|ada", sub=None),
        "not a token": lambda: "not-a-jwt",
    }
    token = tokens[case]() if tokens[case] else None
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    response = requests.post(f"{mcp_server}/mcp", json=INITIALIZE, headers=headers, timeout=10)
    assert response.status_code == 401
    challenge = response.headers["WWW-Authenticate"]
    assert challenge.startswith("Bearer ") and 'error="invalid_token"' in challenge
    assert f'resource_metadata="{mcp_server}/.well-known/oauth-protected-resource/mcp"' in challenge
    assert not TrackedUser.objects.exists()


def test_the_protected_resource_metadata_names_the_auth0_tenant(mcp_server, auth0):
    metadata = requests.get(f"{mcp_server}/.well-known/oauth-protected-resource/mcp", timeout=10).json()
    assert metadata["resource"] == f"{mcp_server}/mcp"
    assert metadata["authorization_servers"] == [auth0.issuer]


def test_hosts_outside_allowed_hosts_are_refused(mcp_server, auth0):
    headers = {
        "Accept": "application/json, text/event-stream",
        "Authorization": f"Bearer {auth0.mint('auth0|ada')}",
        "Host": "attacker.example.com",
    }
    assert requests.post(f"{mcp_server}/mcp", json=INITIALIZE, headers=headers, timeout=10).status_code == 421
    headers.update(Host="localhost", Origin="https://attacker.example.com")
    assert requests.post(f"{mcp_server}/mcp", json=INITIALIZE, headers=headers, timeout=10).status_code == 403


def test_readiness_covers_the_mcp_server(mcp_server, auth0, client, settings):
    settings.AUTH0_DOMAIN, settings.MCP_AUDIENCE, settings.MCP_INTERNAL_URL = auth0.domain, AUDIENCE, mcp_server
    settings.HEALTH_CHECK_TOKEN, settings.READYZ_CACHE_SECONDS = "health-token", 0  # the details, uncached
    ask = {"HTTP_ACCEPT": "application/json", "HTTP_AUTHORIZATION": "Bearer health-token"}
    job_runtime.jobs_sweep()  # the sweep check wants a recent sweep
    response = client.get("/readyz", **ask)
    assert response.status_code == 200, response.content
    assert response.json()["checks"]["McpServer"] == "OK"

    settings.MCP_INTERNAL_URL = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    response = client.get("/readyz", **ask)
    assert response.status_code == 500
    assert response.json()["checks"]["McpServer"] == "Unavailable: MCP server unreachable"

    settings.MCP_AUDIENCE = ""  # the MCP server is off: nothing to be ready for
    assert client.get("/readyz", **ask).json()["checks"]["McpServer"] == "OK"
