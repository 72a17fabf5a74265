"""The second baseline: ours' promises kept the plain way. The SDK's server with the same bearer-token auth
(ours' Auth0 verifier and settings, docs_mcp.server.bearer_auth) and the same search_docs tool, which records
each call on the caller's profile before it answers, one database call per tool call through Django's usual
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
from mcp.server.mcpserver import Context, MCPServer  # noqa: E402
from pydantic import Field  # noqa: E402

from docs_mcp import tools  # noqa: E402
from docs_mcp.server import bearer_auth  # noqa: E402
from docs_users import activity  # noqa: E402

server = MCPServer("durable", **bearer_auth())


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
