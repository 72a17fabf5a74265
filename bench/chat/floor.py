"""The floor: a minimal async Django view that only relays one answer of the fake agent as SSE.

No key, no validation, no throttle, no database, no answer kept: what any relay
through one daphne process must at least do. Served by the same daphne as the
product's stream, through the same middleware.
"""

import json

from django.conf import settings
from django.http import StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt
from websockets.asyncio.client import connect


@csrf_exempt
async def minimal_relay(request):
    body = json.loads(request.body)

    async def frames():
        async with connect(settings.CHAT_AGENT_URL, compression=None, ping_interval=None, open_timeout=60) as ws:
            await ws.send(json.dumps({"query": body["message"], "session_id": body["sessionId"], "user_ip": None}))
            async for frame in ws:
                event = json.loads(frame)
                if event["event"] == "RunContent":
                    yield b"event: token\ndata: %s\n\n" % json.dumps({"content": event["content"]}).encode()
                elif event["event"] == "RunCompleted":
                    yield b"event: done\ndata: %s\n\n" % json.dumps({"content": event["content"]}).encode()
                    return

    return StreamingHttpResponse(frames(), content_type="text/event-stream", headers={"Cache-Control": "no-cache"})
