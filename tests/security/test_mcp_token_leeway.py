"""The MCP server's 30 s of clock skew on `exp`, end to end: uvicorn serving config.mcp_asgi, real RS256 tokens
signed by the Auth0 stand-in, plain HTTP requests to /mcp."""

import time

import pytest
import requests

from docs_users.models import TrackedUser
from integrations.auth0.access_tokens import LEEWAY_SECONDS
from tests.docs_mcp import conftest as docs_mcp_fixtures
from tests.docs_mcp.conftest import serve_mcp

pytestmark = pytest.mark.django_db(transaction=True)

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "curl", "version": "1"}},
}
LIST_TOOLS = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}


# The MCP tests' Auth0 stand-in, where this module's MCP process reaches it.
upstream_ports, auth0 = docs_mcp_fixtures.upstream_ports, docs_mcp_fixtures.auth0


@pytest.fixture(scope="module")
def mcp_server(django_db_setup, upstream_ports, make_httpserver, tmp_path_factory):
    yield from serve_mcp(upstream_ports, make_httpserver, tmp_path_factory)


def expired_token(auth0, sub: str, seconds_ago: int) -> tuple[str, int]:
    exp = int(time.time()) - seconds_ago
    return auth0.mint(sub, iat=exp - 3600, exp=exp), exp


def initialize(base: str, token: str) -> requests.Response:
    headers = {**HEADERS, "Authorization": f"Bearer {token}"}
    return requests.post(f"{base}/mcp", json=INITIALIZE, headers=headers, timeout=10)


def list_tools(base: str, token: str, session_id: str) -> requests.Response:
    headers = {**HEADERS, "Authorization": f"Bearer {token}", "Mcp-Session-Id": session_id}
    return requests.post(f"{base}/mcp", json=LIST_TOOLS, headers=headers, timeout=10)


def test_a_token_expired_10_seconds_ago_is_accepted(mcp_server, auth0):
    token, _ = expired_token(auth0, "auth0|skewed", 10)

    response = initialize(mcp_server, token)

    assert response.status_code == 200, response.text
    assert response.json()["result"]["serverInfo"]["name"] == "docs"
    tools = list_tools(mcp_server, token, response.headers["Mcp-Session-Id"])
    assert tools.status_code == 200, tools.text
    assert {tool["name"] for tool in tools.json()["result"]["tools"]} == {"search_docs", "ask_docs", "get_page"}
    assert TrackedUser.objects.get(sub="auth0|skewed").last_channel == "mcp"


def test_a_token_expired_60_seconds_ago_is_refused(mcp_server, auth0):
    token, _ = expired_token(auth0, "auth0|stale", 60)

    response = initialize(mcp_server, token)

    assert response.status_code == 401
    assert 'error="invalid_token"' in response.headers["WWW-Authenticate"]
    assert not TrackedUser.objects.filter(sub="auth0|stale").exists()


def test_a_token_in_use_stops_working_once_past_the_leeway(mcp_server, auth0):
    """The server keeps a verified token for the session's later requests: those end with the leeway too."""
    token, exp = expired_token(auth0, "auth0|lingering", LEEWAY_SECONDS - 3)
    response = initialize(mcp_server, token)
    assert response.status_code == 200, response.text
    session_id = response.headers["Mcp-Session-Id"]

    time.sleep(max(0.0, exp + LEEWAY_SECONDS - time.time()) + 0.1)

    refused = list_tools(mcp_server, token, session_id)
    assert refused.status_code == 401
    assert 'error="invalid_token"' in refused.headers["WWW-Authenticate"]
