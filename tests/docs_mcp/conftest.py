"""Our MCP server as production runs it (uvicorn serving docs_mcp.asgi, the Procfile's `mcp`), against local
fakes of Auth0, Kapa and the docs site, spoken to by the SDK's own client over real HTTP."""

import contextlib
import subprocess
import time
from pathlib import Path

import httpx2
import pytest
import requests
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp_types import Implementation

from tests.conftest import free_port, subprocess_env
from tests.docs_mcp.fakes import API_KEY, AUDIENCE, PROJECT, FakeAuth0, FakeKapa, serve_docs_site

PROJECT_DIR = Path(__file__).resolve().parents[2]
OWNER_SALT = "owner-salt-1"


@pytest.fixture(scope="module")
def mcp_server(django_db_setup, make_httpserver, tmp_path_factory):
    """The MCP process on a free port; its base URL. Shares the test database (tests use transactional_db)."""
    yield from serve_mcp(make_httpserver, tmp_path_factory, MCP_TOOL_CALLS_RATE="1000/min")


def serve_mcp(make_httpserver, tmp_path_factory, **settings):
    port = free_port()
    fakes = make_httpserver.url_for("/").rstrip("/")
    base = f"http://127.0.0.1:{port}"
    env = subprocess_env(
        AUTH0_DOMAIN=fakes,
        MCP_AUDIENCE=AUDIENCE,
        SITE_URL=base,
        ALLOWED_HOSTS="127.0.0.1,localhost",
        KAPA_API_URL=fakes,
        KAPA_API_KEY=API_KEY,
        KAPA_PROJECT_ID=PROJECT,
        KAPA_OWNER_SALT=OWNER_SALT,
        MCP_DOCS_ORIGINS=fakes,
        **settings,
    )
    log = (tmp_path_factory.mktemp("mcp") / "uvicorn.log").open("w")
    command = [str(PROJECT_DIR / ".venv/bin/uvicorn"), "docs_mcp.asgi:application", "--port", str(port)]
    process = subprocess.Popen(command, cwd=PROJECT_DIR, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        _wait_until_up(f"{base}/healthz", process)
        yield base
    finally:
        process.terminate()
        process.wait(timeout=10)
        log.close()


def _wait_until_up(url: str, process, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError("the MCP server exited")
        with contextlib.suppress(requests.ConnectionError):
            if requests.get(url, timeout=2).ok:
                return
        time.sleep(0.2)
    raise AssertionError("the MCP server did not start")


@pytest.fixture
def auth0(httpserver):
    return FakeAuth0(httpserver)


@pytest.fixture
def kapa(httpserver):
    return FakeKapa(httpserver)


@pytest.fixture
def docs_site(httpserver):
    serve_docs_site(httpserver)
    return httpserver.url_for("/").rstrip("/")


@contextlib.asynccontextmanager
async def mcp_session(base: str, token: str | None, *, client_name: str = "claude-code", user_agent: str = ""):
    """An initialized session of the SDK's client with our server."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if user_agent:
        headers["User-Agent"] = user_agent
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        streamable_http_client(f"{base}/mcp", http_client=http) as (read, write),
        ClientSession(read, write, client_info=Implementation(name=client_name, version="1.0.3")) as session,
    ):
        await session.initialize()
        yield session
