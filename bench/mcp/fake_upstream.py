"""The bench's Kapa and Auth0: Kapa's retrieval answering after a fixed delay, and the tenant's JWKS.

    python bench/mcp/fake_upstream.py PORT DELAY_MS JWKS_FILE
"""

import asyncio
import json
import sys

from aiohttp import web

# Retrieval's documented answer: a list of {source_url, content}, content led by its breadcrumb heading.
CHUNKS = [
    {
        "source_url": f"https://docs.example.com/page-{n}",
        "content": f"# Docs > Security > Result {n}\n## Steps\n\n" + "A passage about the query. " * 22,
    }
    for n in range(1, 6)
]


def main():
    port, delay, jwks_file = int(sys.argv[1]), float(sys.argv[2]) / 1000, sys.argv[3]
    jwks = json.loads(open(jwks_file).read())  # noqa: SIM115 - read once at start

    async def retrieval(request):
        await request.read()
        await asyncio.sleep(delay)
        return web.json_response(CHUNKS)

    async def keys(request):
        return web.json_response(jwks)

    app = web.Application()
    app.router.add_post("/query/v1/projects/{project}/retrieval/", retrieval)
    app.router.add_get("/.well-known/jwks.json", keys)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)


if __name__ == "__main__":
    main()
