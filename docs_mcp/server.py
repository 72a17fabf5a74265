"""The MCP server and its streamable HTTP application, configured from settings.

- Auth: Auth0 access tokens for the API `MCP_AUDIENCE` (docs_mcp/auth.py).
  The SDK answers 401 with `WWW-Authenticate` and serves the RFC 9728
  protected-resource metadata at `/.well-known/oauth-protected-resource/mcp`,
  naming the Auth0 tenant as the authorization server.
- Transport security: the SDK answers 421 to a Host, and 403 to an Origin,
  that it does not know (DNS rebinding). Both lists come from ALLOWED_HOSTS
  and SITE_URL, so the hosts Django serves are the hosts /mcp serves.
- Sessions are stateful (the SDK's default): the client named in a session's
  initialize request is known on each of its calls. JSON responses, not SSE
  streams: the tools send no progress or server-to-client requests.
- A session's initialize records the caller's sign-in through the MCP
  server (channel `mcp`, the client from clientInfo or the User-Agent).
"""

from urllib.parse import urlsplit

import anyio
from django.conf import settings
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from docs_mcp import is_configured, tools
from docs_mcp.auth import Auth0TokenVerifier
from docs_mcp.wrapper import caller_of, caller_sign_in, tracked_tool
from integrations.auth0.access_tokens import AccessTokenVerifier
from integrations.auth0.client import issuer_from_domain

PATH = "/mcp"
INSTRUCTIONS = (
    "Tools over the product documentation: search_docs finds passages, ask_docs asks the documentation "
    "assistant, get_page reads a docs page. Every tool takes an optional `context`: say in one sentence why "
    "you call it, never with secrets or personal data."
)


NOT_CONFIGURED = "The MCP server is not configured on this site (AUTH0_DOMAIN and MCP_AUDIENCE).\n"


def application_from_settings() -> Starlette:
    """The MCP app, or while the server is not configured, one that says so at /mcp."""
    if not is_configured():
        return Starlette(routes=[Route("/healthz", _healthz), Route(PATH, _not_configured, methods=["GET", "POST"])])
    return build_app(build_server())


def resource_url() -> str:
    return settings.SITE_URL.rstrip("/") + PATH


def bearer_auth() -> dict:
    """MCPServer's token check and protected-resource metadata: Auth0 access tokens for MCP_AUDIENCE."""
    verifier = AccessTokenVerifier(settings.AUTH0_DOMAIN, audience=settings.MCP_AUDIENCE)
    return {
        "token_verifier": Auth0TokenVerifier(verifier),
        "auth": AuthSettings(
            issuer_url=issuer_from_domain(settings.AUTH0_DOMAIN),
            resource_server_url=resource_url(),
            required_scopes=settings.MCP_REQUIRED_SCOPES or None,
            validate_token_resource=False,  # the verifier requires MCP_AUDIENCE in `aud` itself
        ),
    }


def build_server() -> MCPServer:
    server = MCPServer("docs", instructions=INSTRUCTIONS, middleware=[_record_sign_in], **bearer_auth())
    server.custom_route("/healthz", methods=["GET"], include_in_schema=False)(_healthz)
    for tool in tools.TOOLS:
        server.add_tool(tracked_tool(tool), name=tool.__name__, description=tool.__doc__)
    return server


def build_app(server: MCPServer) -> Starlette:
    return server.streamable_http_app(
        streamable_http_path=PATH,
        json_response=True,
        transport_security=transport_security(),
        max_request_body_size=settings.MCP_MAX_REQUEST_BYTES,
    )


def transport_security() -> TransportSecuritySettings:
    """Hosts from ALLOWED_HOSTS (any port), origins from SITE_URL and those hosts.

    Django's `.example.com` (the domain and its subdomains) becomes the domain
    itself: the SDK matches exact names only. `*` turns the check off, as it
    turns off Django's.
    """
    if "*" in settings.ALLOWED_HOSTS:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    site = urlsplit(settings.SITE_URL)
    hosts = {host.lstrip(".") for host in settings.ALLOWED_HOSTS if host.strip(".")}
    if site.hostname:
        hosts.add(site.netloc)
    allowed_hosts = sorted({name for host in hosts for name in (host, f"{host}:*")})
    origins = {f"{site.scheme}://{site.netloc}"} if site.netloc else set()
    origins |= {f"{scheme}://{host}" for host in hosts for scheme in ("https", site.scheme or "https")}
    allowed_origins = sorted({name for origin in origins for name in (origin, f"{origin}:*")})
    return TransportSecuritySettings(allowed_hosts=allowed_hosts, allowed_origins=allowed_origins)


async def _healthz(request):
    return PlainTextResponse("ok\n")


async def _not_configured(request):
    return PlainTextResponse(NOT_CONFIGURED, status_code=404)


async def _record_sign_in(ctx, call_next):
    """After a successful initialize: the caller signed in through the MCP server."""
    result = await call_next(ctx)
    if ctx.method == "initialize":
        client_info = (ctx.params or {}).get("clientInfo")
        name = client_info.get("name") if isinstance(client_info, dict) else ""
        caller = caller_of(ctx.request, name if isinstance(name, str) else "")
        if caller is not None:
            with anyio.CancelScope(shield=True):  # a client that leaves mid-handshake still signed in
                await caller_sign_in(caller)
    return result
