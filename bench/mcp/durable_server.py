"""The second baseline: ours' promises kept the plain way. The SDK's server with the same bearer-token auth
(the SDK's middleware and our Auth0 verifier, as ours) and the same search_docs tool, which records each
call on the caller's profile before it answers, one database call per tool call through Django's usual
bridge (`sync_to_async`), as a handler written without the product's batching would. No `context`, no rate
count, no wrapper.

    uvicorn bench.mcp.durable_server:app
"""

import os
from typing import Annotated

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django.setup()

from asgiref.sync import sync_to_async  # noqa: E402
from django.conf import settings  # noqa: E402
from mcp.server.auth.settings import AuthSettings  # noqa: E402
from mcp.server.mcpserver import Context, MCPServer  # noqa: E402
from pydantic import Field  # noqa: E402

from docs_mcp import tools  # noqa: E402
from docs_mcp.auth import Auth0TokenVerifier  # noqa: E402
from docs_users import activity  # noqa: E402
from integrations.auth0.access_tokens import AccessTokenVerifier  # noqa: E402
from integrations.auth0.client import issuer_from_domain  # noqa: E402

server = MCPServer(
    "durable",
    token_verifier=Auth0TokenVerifier(AccessTokenVerifier(settings.AUTH0_DOMAIN, audience=settings.MCP_AUDIENCE)),
    auth=AuthSettings(
        issuer_url=issuer_from_domain(settings.AUTH0_DOMAIN),
        resource_server_url=settings.SITE_URL.rstrip("/") + "/mcp",
        validate_token_resource=False,
    ),
)


@server.tool(description=tools.search_docs.__doc__)
async def search_docs(
    query: Annotated[str, Field(min_length=1, max_length=500, description="What to look for in the documentation.")],
    ctx: Context,
) -> list[tools.SearchHit]:
    hits = await tools.search_docs(query)
    sub = ctx.request_context.request.scope["user"].access_token.subject
    await sync_to_async(activity.mcp_tool_call_record)(sub=sub, tool="search_docs")
    return hits


app = server.streamable_http_app(streamable_http_path="/mcp", json_response=True)
