"""Our MCP server as production runs it (uvicorn serving config.mcp_asgi, the Procfile's `mcp`), against the
stand-ins of Auth0 and Kapa and a local docs site, spoken to by the SDK's own client over real HTTP."""

import contextlib
import subprocess
from pathlib import Path

import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp_types import Implementation

from standins.auth0 import AUDIENCE, Auth0
from standins.kapa import API_KEY, PROJECT, Kapa
from tests.conftest import free_port, subprocess_env, wait_until_up

PROJECT_DIR = Path(__file__).resolve().parents[2]
OWNER_SALT = "owner-salt-1"
DOCS_PAGE = """<!doctype html><html><head><title>Enable TLS | Docs</title><style>p{color:red}</style></head>
<body><nav>Home</nav><h1>Enable TLS</h1><script>track()</script>
<p>Set <code>tls.enabled</code> to true.</p></body></html>"""


@pytest.fixture(scope="module")
def upstream_ports():
    """Where the MCP process reaches Auth0 and Kapa: the same for the whole module, as the process is."""
    return {"auth0": free_port(), "kapa": free_port()}


@pytest.fixture(scope="module")
def mcp_server(django_db_setup, upstream_ports, make_httpserver, tmp_path_factory):
    """The MCP process on a free port; its base URL. Shares the test database (tests use transactional_db)."""
    yield from serve_mcp(upstream_ports, make_httpserver, tmp_path_factory, MCP_TOOL_CALLS_RATE="1000/min")


def serve_mcp(upstream_ports, make_httpserver, tmp_path_factory, **settings):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = subprocess_env(
        AUTH0_DOMAIN=f"http://127.0.0.1:{upstream_ports['auth0']}",
        MCP_AUDIENCE=AUDIENCE,
        SITE_URL=base,
        ALLOWED_HOSTS="127.0.0.1,localhost",
        KAPA_API_URL=f"http://127.0.0.1:{upstream_ports['kapa']}",
        KAPA_API_KEY=API_KEY,
        KAPA_PROJECT_ID=PROJECT,
        KAPA_OWNER_SALT=OWNER_SALT,
        MCP_DOCS_ORIGINS=make_httpserver.url_for("/").rstrip("/"),
        **settings,
    )
    log = (tmp_path_factory.mktemp("mcp") / "uvicorn.log").open("w")
    command = [str(PROJECT_DIR / ".venv/bin/uvicorn"), "config.mcp_asgi:application", "--port", str(port)]
    process = subprocess.Popen(command, cwd=PROJECT_DIR, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_until_up(f"{base}/healthz", process)
        yield base
    finally:
        process.terminate()
        process.wait(timeout=10)
        log.close()


@pytest.fixture
def auth0(upstream_ports):
    """The tenant, where the MCP process reaches it, for one test."""
    with Auth0(audience=AUDIENCE, port=upstream_ports["auth0"]) as tenant:
        yield tenant


@pytest.fixture
def kapa(upstream_ports):
    """Kapa with nothing asked yet, where the MCP process reaches it."""
    with Kapa(port=upstream_ports["kapa"]) as stand_in:
        yield stand_in


@pytest.fixture
def docs_site(httpserver):
    serve_docs_site(httpserver)
    return httpserver.url_for("/").rstrip("/")


def serve_docs_site(httpserver) -> None:
    """The docs site's pages on pytest-httpserver: one page, a redirect to it and one to a metadata address."""
    httpserver.expect_request("/docs/tls").respond_with_data(DOCS_PAGE, content_type="text/html; charset=utf-8")
    httpserver.expect_request("/docs/old-tls").respond_with_data("", status=301, headers={"Location": "/docs/tls"})
    httpserver.expect_request("/docs/away").respond_with_data(
        "", status=302, headers={"Location": "http://169.254.169.254/latest/meta-data/"}
    )


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
