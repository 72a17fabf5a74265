"""The sales agent, an Agno agent, as the product reaches it (integrations/agent), both ways on one port, answering
with Agno's run events (RunEvent in agno/run/agent.py):

- its own WebSocket, at any path (`url`: ws://host:port/agent): it reads one text frame `{query, session_id,
  user_ip}` and answers one JSON event per text frame;
- a stock AgentOS (`agentos_url`): `POST /agents/{agent_id}/runs` with form fields `message`, `stream`,
  `session_id`, `user_id`, answered as SSE frames `event: <RunEvent>\\ndata: <json>`; with a security key
  (`token`) a request without it is 401 `{"detail": "Invalid authentication token"}`, another agent 404.

A run is RunStarted, a ToolCallStarted (which the relay ignores), one RunContent per token, then
RunContentCompleted and RunCompleted with the whole answer and `metadata`. Each plays `mode`: "stream" (the
whole answer), "stall" (stops after `cut_after` tokens and says nothing more), "drop" (the connection breaks
after `cut_after` tokens), "error" (RunError after `cut_after` tokens). Token n is due `delay` × n seconds
after the run starts, so a late send does not push back the ones after it. `reject_status` refuses every
connection or run with that status.

By default every answer is `tokens`. With `demo`, as `make run` wants it, the agent answers from a short
script about the services (web and mobile apps, automation, dedicated teams, two-week prototypes, prices),
and when the visitor's message has an email in it, creates the lead through the product's `POST /api/leads`
(at `product_url`) with the chat key and the chat session id, as the real agent does, so the lead and its
conversation are linked in the admin.

    python -m standins.agent --port 8773 --product-url http://127.0.0.1:8000 --chat-key KEY
    python -m standins.agent --port 8773 --tokens 300 --interval-ms 5    # a benchmark's agent
"""

import argparse
import asyncio
import contextlib
import ipaddress
import itertools
import json
import re
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Sequence
from urllib.parse import urljoin

import aiohttp
from aiohttp import web

from standins.base import Received
from standins.serving import AiohttpStandIn

AGENT_ID = "sales-agent"
TOKENS = ["Hello", "! We ", "build ", "prototypes ", "in ", "two ", "weeks."]
CHAT_KEY = "standin-chat-key"

# (intent, what the visitor says, the answer, the lead's serviceType when they then leave their email)
SCRIPT = [
    ("pricing", r"price|pricing|cost|budget|how much|quote|estimate|rates?",
     "Ballpark figures: a two-week prototype is a fixed €6,000 to €9,000. A first release of a web or mobile app "
     "usually lands between €30,000 and €120,000, depending on scope, and a dedicated team starts at about "
     "€25,000 a month. Leave your email and we'll send you an estimate for your project.", ""),
    ("prototype", r"prototype|mvp|proof of concept|poc|two weeks|2 weeks|demo",
     "We can put a working prototype in front of your users within two weeks: a short diagnostic in the first "
     "days, then a version you can click through on real data, then a review with a plan for the real product. "
     "Want one? Tell me your email and what it should do.", "diagnostic"),
    ("mobile", r"mobile|ios|android|iphone|app store|play store|react native",
     "We build mobile apps for iOS and Android, usually with React Native so one codebase serves both stores, "
     "and in Swift or Kotlin where performance needs it. We take care of the store submissions too. What would "
     "your app do?", ""),
    ("automation", r"automat\w*|workflow|manual|spreadsheet|excel|invoic\w*|integrat\w*",
     "We automate the manual work between your tools: approvals, invoicing, reporting, keeping your CRM and "
     "spreadsheets in sync. A short diagnostic shows which steps pay back first. Which process takes most of "
     "your team's time?", "process_automation"),
    ("team", r"team|developers?|engineers?|hire|hiring|staff|outsourc\w*",
     "If you need more hands, we set up a dedicated team, typically a tech lead, two or three engineers and a "
     "designer, working in your tools and rituals, ready within two to three weeks.", "dedicated_team"),
    ("strategy", r"strategy|architecture|cto|roadmap|audit|advice|consult\w*",
     "We can review your architecture and roadmap with you: a technology strategy in a few workshops, or "
     "ongoing advice from one of our senior engineers.", "technology_strategy"),
    ("web", r"web|website|portal|dashboard|saas|platform|backend|back office",
     "We build web apps end to end: customer portals, internal dashboards and SaaS products, with Django or "
     "Node behind and React in front. Most first releases ship in 8 to 12 weeks. What do you have in mind?", ""),
    ("greeting", r"hello|hi|hey|good (?:morning|afternoon|evening)|bonjour",
     "Hi! I'm the sales assistant. We build web apps, mobile apps and automations, and we can put a working "
     "prototype in your hands within two weeks. What are you working on?", ""),
]  # fmt: skip
FALLBACK = (
    "Happy to help. We design and build web and mobile apps, automate back-office work, and can show you a "
    "working prototype within two weeks. If you leave your email, someone from the team will follow up."
)
_SCRIPT = [(intent, re.compile(rf"\b(?:{words})\b", re.IGNORECASE), text, kind) for intent, words, text, kind in SCRIPT]
_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
_NAME = re.compile(r"(?i:my name is|i am|i'm|this is)\s+([A-Z][A-Za-z'-]+)")
_TOKEN = re.compile(r"\S+\s*")


class Agent(AiohttpStandIn):
    name = "agent"

    def __init__(
        self,
        *,
        token: str = "",
        agent_id: str = AGENT_ID,
        tokens: Sequence[str] = TOKENS,
        delay: float = 0.0,
        reject_status: int | None = None,
        demo: bool = False,
        product_url: str = "",
        chat_key: str = CHAT_KEY,
        host: str = "127.0.0.1",
        port: int = 0,
    ):
        super().__init__(host=host, port=port)
        self.token = token  # the bearer token it requires (AgentOS's security key); empty: none
        self.agent_id = agent_id
        self.mode = "stream"
        self.tokens = list(tokens)
        self.delay = delay  # seconds between tokens
        self.cut_after = 3  # tokens sent before a stall, drop or error
        self.metadata = {"intent": "prototype", "lead_created": False}
        self.reject_status = reject_status
        self.demo = demo
        self.product_url = product_url.rstrip("/")
        self.chat_key = chat_key
        self.runs: list[dict] = []  # what each run was asked: the WebSocket's frame, or AgentOS's form
        self.headers: list = []  # each connection's or run's request headers
        self._run_ids = itertools.count(1)
        self._interests: OrderedDict[str, str] = OrderedDict()  # session → the service it asked about last

    @property
    def url(self) -> str:
        """CHAT_AGENT_URL for the WebSocket."""
        return f"ws://{self.host}:{self.port}/agent"

    @property
    def agentos_url(self) -> str:
        """CHAT_AGENT_URL for the AgentOS."""
        return self.origin

    @property
    def full_answer(self) -> str:
        return "".join(self.tokens)

    def said_before_cut(self) -> str:
        return "".join(self.tokens[: self.cut_after])

    def settings(self) -> dict[str, str]:
        return {
            "CHAT_AGENT_URL": self.url,
            "CHAT_AGENT_TOKEN": self.token,
            "CHAT_AGENT_ID": self.agent_id,
            "CHAT_API_KEY": self.chat_key,  # the key the agent sends the product's lead API
        }

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/agents/{agent_id}/runs", self._agentos_run)
        app.router.add_get("/{path:.*}", self._websocket)

    def _refusal(self, request: web.Request) -> web.Response | None:
        if self.token and request.headers.get("Authorization") != f"Bearer {self.token}":
            return web.json_response({"detail": "Invalid authentication token"}, status=401)
        if self.reject_status:
            return web.json_response({"detail": "unavailable"}, status=self.reject_status)
        return None

    # --- the two transports -------------------------------------------------------------------------

    async def _websocket(self, request: web.Request) -> web.StreamResponse:
        self.headers.append(request.headers.copy())
        if refusal := self._refusal(request):
            return refusal
        websocket = web.WebSocketResponse(compress=False)
        if not websocket.can_prepare(request).ok:
            return web.Response(status=426, text="This is the agent's WebSocket.\n")
        await websocket.prepare(request)
        frame = await websocket.receive()
        asked = json.loads(frame.data) if frame.type == aiohttp.WSMsgType.TEXT else {}
        self.runs.append(asked)
        # aclosing: a run the product left mid-answer is recorded as it ended, not when it is collected.
        async with contextlib.aclosing(self._run(str(asked.get("query", "")), asked.get("session_id"),
                                                 asked.get("user_ip"))) as events:  # fmt: skip
            with contextlib.suppress(ConnectionResetError):  # the product went away mid-answer
                async for event in events:
                    if event is None and self.mode == "drop":
                        request.transport.abort()  # no close frame: the connection just breaks
                    elif event is None:  # stall: say nothing until the product gives up
                        async for _ in websocket:
                            pass
                    else:
                        await websocket.send_str(json.dumps(event))
        return websocket

    async def _agentos_run(self, request: web.Request) -> web.StreamResponse:
        form = {name: str(value) for name, value in (await request.post()).items()}
        self.headers.append(request.headers.copy())
        self.runs.append(form)
        if refusal := self._refusal(request):
            return refusal
        if request.match_info["agent_id"] != self.agent_id:
            return web.json_response({"detail": "Agent not found"}, status=404)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)
        async with contextlib.aclosing(
            self._run(form.get("message", ""), form.get("session_id"), form.get("user_id"))
        ) as events:
            with contextlib.suppress(ConnectionResetError):
                async for event in events:
                    if event is None and self.mode == "drop":
                        request.transport.abort()  # the chunked body is cut short
                        return response
                    if event is None:  # stall: nothing more, until the product gives up or the stand-in stops
                        while request.transport is not None and not request.transport.is_closing():
                            await asyncio.sleep(0.05)
                        return response
                    frame = f"event: {event['event']}\ndata: {json.dumps(event, separators=(',', ':'))}\n\n"
                    await response.write(frame.encode())
                await response.write_eof()
        return response

    # --- one run ------------------------------------------------------------------------------------

    async def _run(self, query: str, session_id: str | None, user_ip: str | None) -> AsyncIterator[dict | None]:
        """The run's events; None where the connection is to drop or stall."""
        base = {"agent_id": self.agent_id, "agent_name": "Sales", "run_id": f"run-{next(self._run_ids)}",
                "session_id": session_id}  # fmt: skip
        loop = asyncio.get_running_loop()
        started = loop.time()
        yield {"event": "RunStarted", "created_at": int(time.time()), **base}
        tool, tokens, metadata = "lookup_lead", self.tokens, self.metadata
        if self.demo:
            tool, answer, metadata = await self._demo_answer(query, session_id, user_ip)
            tokens = _TOKEN.findall(answer)
        yield {"event": "ToolCallStarted", **base, "tool": {"tool_name": tool}}
        said = []
        try:
            for index, token in enumerate(tokens):
                if self.mode != "stream" and index == self.cut_after:
                    if self.mode == "error":
                        yield {"event": "RunError", "content": "model provider failed", **base}
                    else:
                        yield None
                    return
                if self.delay and (wait := started + (index + 1) * self.delay - loop.time()) > 0:
                    await asyncio.sleep(wait)
                yield {"event": "RunContent", "content": token, "content_type": "str", **base}
                said.append(token)
            yield {"event": "RunContentCompleted", **base}
            yield {"event": "RunCompleted", "content": "".join(tokens), "content_type": "str", "metadata": metadata,
                   **base}  # fmt: skip
        finally:
            outcome = "complete" if len(said) == len(tokens) else self.mode
            self.record(
                Received(self.name, "chat", query[:120], body=f"Visitor: {query}\n\nAgent: {''.join(said)}",
                         detail={"session_id": session_id, "outcome": outcome})
            )  # fmt: skip

    # --- the demo's script --------------------------------------------------------------------------

    async def _demo_answer(self, query: str, session_id: str | None, user_ip: str | None) -> tuple[str, str, dict]:
        """(the tool it calls, its answer, the run's metadata) for a visitor's message."""
        matched = next(((intent, text, kind) for intent, words, text, kind in _SCRIPT if words.search(query)), None)
        if matched and matched[2] and session_id:
            self._interests[session_id] = matched[2]
            self._interests.move_to_end(session_id)
            while len(self._interests) > 10_000:
                self._interests.popitem(last=False)
        email = _EMAIL.search(query)
        if email is None:
            intent, text, _ = matched or ("other", FALLBACK, "")
            return "lookup_lead", text, {"intent": intent, "lead_created": False}
        name = _first_name(query, email.group(0))
        service = (matched[2] if matched else "") or self._interests.get(session_id or "", "")
        lead = await self._create_lead(query, name, email.group(0), service, session_id, user_ip)
        if lead is None:
            text = (
                f"Thanks, {name}. I couldn't pass your details on just now; please try again in a minute, or use "
                "the contact form and the team will get back to you."
            )
            return "create_lead", text, {"intent": "lead", "lead_created": False}
        text = (
            f"Thanks, {name}! I've passed your request to the team: someone will write to {email.group(0)} within "
            "one business day."
        )
        progress = (lead.get("prototype") or {}).get("progressUrl")
        if progress:
            progress = urljoin(self.product_url, progress)
            text += f" We've also started on a first prototype; you can follow it here: {progress}"
        return "create_lead", text, {"intent": "lead", "lead_created": True, "lead_id": lead.get("leadId")}

    async def _create_lead(self, query, name, email, service, session_id, user_ip) -> dict | None:
        """The product's answer to the lead, or None when it was not created."""
        body = {"firstName": name, "email": email, "message": query[:5000]}
        if service:
            body["serviceType"] = service
        headers = {"X-Chat-Api-Key": self.chat_key}
        if session_id:
            headers["X-Chat-Session-Id"] = session_id
        if _is_ip(user_ip):
            headers["X-User-IP"] = user_ip
        status, answer = None, {}
        try:
            async with (
                aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http,
                http.post(f"{self.product_url}/api/leads", json=body, headers=headers) as response,
            ):
                status, answer = response.status, await response.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            answer = {"error": type(exc).__name__}
        self.record(
            Received(self.name, "lead", f"{name} <{email}>", body=query,
                     detail={"status": status, "session_id": session_id, "answer": answer})
        )  # fmt: skip
        return answer if status == 200 else None


def _first_name(query: str, email: str) -> str:
    """The name the visitor gave ("my name is …"), else one made from their email's local part."""
    if named := _NAME.search(query):
        return named.group(1)
    local = re.split(r"[._+\-0-9]", email.split("@")[0])[0]
    return local.capitalize() or "Visitor"


def _is_ip(value: str | None) -> bool:
    try:
        ipaddress.ip_address(value or "")
    except ValueError:
        return False
    return True


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="The sales agent: a WebSocket and an AgentOS on one port.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8773)
    parser.add_argument("--product-url", default="http://127.0.0.1:8000", help="where it creates leads")
    parser.add_argument("--chat-key", default=CHAT_KEY, help="the product's CHAT_API_KEY")
    parser.add_argument("--token", default="", help="the bearer token it requires (AgentOS's security key)")
    parser.add_argument("--interval-ms", type=float, default=20.0, help="time between tokens")
    parser.add_argument("--tokens", type=int, default=0, help="answer N numbered tokens instead of the script")
    args = parser.parse_args(argv)
    Agent(
        token=args.token,
        tokens=[f"t{index:03d} " for index in range(args.tokens)],
        delay=args.interval_ms / 1000,
        demo=not args.tokens,
        product_url=args.product_url,
        chat_key=args.chat_key,
        host=args.host,
        port=args.port,
    ).serve_until_signalled()


if __name__ == "__main__":
    main()
