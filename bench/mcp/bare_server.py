"""The baseline: the SDK's own server with the same search_docs tool, and nothing of ours around it.

No wrapper (no `context`, no recording, no rate count), no auth, no transport
checks beyond the SDK's localhost defaults; the SDK's streamable HTTP app with
its lifespan, served by uvicorn as the SDK documents. The tool body is ours
(docs_mcp.tools.search_docs: the same Kapa client, worker threads and result
model), so the difference measured is what the product adds around a call.

    uvicorn bench.mcp.bare_server:app
"""

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django.setup()

from mcp.server.mcpserver import MCPServer  # noqa: E402

from docs_mcp import tools  # noqa: E402

server = MCPServer("bare")
server.add_tool(tools.search_docs, name="search_docs", description=tools.search_docs.__doc__)
app = server.streamable_http_app(streamable_http_path="/mcp", json_response=True)
