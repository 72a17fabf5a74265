"""The floor: a minimal async Django view that only relays one answer of the fake agent as SSE.

No key, no validation, no throttle, no database, no answer kept: what any relay
through one daphne process must at least do. Served by the same daphne as the
product's stream, through the same middleware.
"""

import json

import aiohttp
from django.conf import settings
from django.http import StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt


@csrf_exempt
async def minimal_relay(request):
    body = json.loads(request.body)

    async def frames():
        # The library and options integrations.agent connects with, one session per chat as it does.
        async with aiohttp.ClientSession() as session, session.ws_connect(
            settings.CHAT_AGENT_URL, heartbeat=None, compress=0
        ) as ws:
            await ws.send_str(json.dumps({"query": body["message"], "session_id": body["sessionId"], "user_ip": None}))
            async for frame in ws:
                event = json.loads(frame.data)
                if event["event"] == "RunContent":
                    yield b"event: token\ndata: %s\n\n" % json.dumps({"content": event["content"]}).encode()
                elif event["event"] == "RunCompleted":
                    yield b"event: done\ndata: %s\n\n" % json.dumps({"content": event["content"]}).encode()
                    return

    return StreamingHttpResponse(frames(), content_type="text/event-stream", headers={"Cache-Control": "no-cache"})
