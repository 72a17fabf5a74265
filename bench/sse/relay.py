"""The baseline: a minimal async Django view that only relays the fake V0 stream of one chat as SSE.

No database, no event log, no hand-over: what any SSE relay must at least do.
"""

import aiohttp
from django.conf import settings
from django.http import StreamingHttpResponse


async def bare_relay(request, chat_id):
    async def frames():
        async with aiohttp.ClientSession() as session:
            url = f"{settings.V0_API_URL}/chats/{chat_id}/resume"
            headers = {"Authorization": f"Bearer {settings.V0_API_KEY}"}
            async with session.post(url, headers=headers, timeout=aiohttp.ClientTimeout(sock_read=120)) as response:
                number = 0
                async for line in response.content:
                    if line.startswith(b"data:"):
                        number += 1
                        yield b"id: %d\nevent: frame\n%s\n" % (number, line)

    return StreamingHttpResponse(frames(), content_type="text/event-stream", headers={"Cache-Control": "no-cache"})
