"""A local Kapa that answers as Kapa's docs and its own clients (LangChain, n8n, the chat widget) show it.

Query API, header `X-API-KEY`:
- Retrieval, `POST /query/v1/projects/{id}/retrieval/`, takes `{"query", "top_k" (1-15), ...}` and answers a
  JSON list of `{"source_url", "content"}`, best first; content is Markdown led by the chunk's breadcrumb
  heading (`# Docs > Section > Page`).
- Chat, `POST /query/v1/projects/{id}/chat/`, takes `{"query", "user": {"unique_client_id", ...}, ...}`,
  starts a thread and answers `{"answer", "thread_id", "question_answer_id", "is_uncertain",
  "relevant_sources": [{"source_url", "title"}]}`.

Agent API (a signed-in user's threads with the chat widget):
- `POST /agent/v1/projects/{id}/agent/sessions/`, header `X-API-Key`, `{"external_owner_id"}` →
  `{"session_token", "expires_at"}`;
- `GET /agent/v1/agent/threads/` (the session token as `Authorization: Bearer`) → that owner's threads,
  `{"results": [{"id", "title", "message_count", "last_activity_at"}], "next_cursor"}`, `?cursor=` for the
  next page; `GET /agent/v1/agent/threads/{id}/` → the thread with its `messages`.

A missing or unknown key is 401, bad input 400 with a list of messages per field, an unknown project 404,
as Kapa's REST framework answers; `fail_next(status, body)` answers the next request with that instead
(a throttle's 429 with Retry-After, an outage's 5xx). Every request body to the query API is kept.

By default the answers are made from the query ("Result n for <query>"), which tests assert on. With
`demo`, as `make run` wants it, they come from a few canned pages of a streaming platform's docs, and an
owner without threads gets two made-up ones, so a profile's Kapa engagement shows something.

    python -m standins.kapa --port 8775 [--retrieval-ms 20]
"""

import argparse
import asyncio
import json
import re
import secrets
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from aiohttp import web

from standins.base import Received
from standins.serving import AiohttpStandIn

API_KEY = "standin-kapa-key"
PROJECT = "standin-project"
INTEGRATION_ID = "standin-mcp-integration"
DOCS_URL = "https://docs.example.com"

# (breadcrumb, path, passage): the demo's docs, a few pages of a Kafka-compatible streaming platform.
DOCS = [
    ("Docs > Security > Enable TLS", "/security/tls",
     "## Turn TLS on\n\nSet `tls.enabled: true` in the cluster settings and restart the brokers one at a time. "
     "Clients then connect on port 9093 and must trust the cluster's CA certificate, which you can download "
     "from the console under Security > Certificates."),
    ("Docs > Security > Rotate certificates", "/security/rotate-certificates",
     "## Rotate certificates without downtime\n\nUpload the new certificate next to the old one, wait until "
     "every broker reports both as active, then remove the old one. Certificates are valid for one year and "
     "the console warns you thirty days before they expire."),
    ("Docs > Security > SASL authentication", "/security/sasl",
     "## Authenticate clients with SASL/SCRAM\n\nCreate a user under Access > Users, choose SCRAM-SHA-512 and "
     "set `sasl.mechanism=SCRAM-SHA-512` with the user's name and password in your client configuration. "
     "ACLs then decide which topics that user may read or write."),
    ("Docs > Get started > Create a topic", "/get-started/topics",
     "## Create your first topic\n\nRun `rpk topic create orders --partitions 6 --replicas 3`, or use the "
     "console's Topics page. Six partitions suit most workloads to start with; you can add partitions later "
     "but never remove them."),
    ("Docs > Get started > Connect a Kafka client", "/get-started/clients",
     "## Connect any Kafka client\n\nThe cluster speaks the Kafka protocol, so existing clients work unchanged: "
     "point `bootstrap.servers` at the address shown on the cluster's overview page. Java, Go, Python and "
     "Node clients are tested on every release."),
    ("Docs > Operations > Retention", "/operations/retention",
     "## Keep data as long as you need\n\nEach topic keeps messages for seven days by default. Set "
     "`retention.ms` per topic, or enable tiered storage to move older segments to object storage and keep "
     "them for months at a fraction of the cost."),
    ("Docs > Migrate > From Confluent Cloud", "/migrate/confluent",
     "## Migrate from Confluent Cloud\n\nMirror your topics with the built-in migrator, switch producers "
     "first and consumers once they have caught up. Consumer group offsets are translated, so nothing is "
     "read twice."),
]  # fmt: skip
DEMO_QUESTIONS = [
    ("Migrating off Confluent", ["How do I migrate from Confluent Cloud?", "Are consumer offsets kept?"]),
    ("TLS", ["How do I enable TLS for my clients?"]),
]
_WORDS = re.compile(r"[a-z0-9]+")


class Kapa(AiohttpStandIn):
    name = "kapa"

    def __init__(
        self,
        *,
        api_key: str = API_KEY,
        project_id: str = PROJECT,
        integration_id: str = INTEGRATION_ID,
        demo: bool = False,
        retrieval_seconds: float = 0.0,
        thread_page_size: int | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ):
        super().__init__(host=host, port=port)
        self.api_key = api_key
        self.project_id = project_id
        self.integration_id = integration_id
        self.demo = demo
        self.retrieval_seconds = retrieval_seconds  # how long Retrieval takes to answer
        self.thread_page_size = thread_page_size  # threads per page; None: as the request asks
        self.requests: list[tuple[str, dict]] = []  # (path, JSON body) of every query API call
        self.questions: list[tuple[str | None, str]] = []  # (the user's unique_client_id, question) asked in Chat
        self.thread_ids: list[str] = []  # of the threads Chat started, in order
        self.threads: dict[str, list[dict]] = {}  # owner id → their threads with the chat widget (agent API)
        self.detail_requests: list[str] = []  # thread ids opened through the agent API, in order
        self._sessions: dict[str, str] = {}  # agent API session token → owner id
        self._failures: list[tuple[int, object, dict]] = []

    def settings(self) -> dict[str, str]:
        return {
            "KAPA_API_URL": self.origin,
            "KAPA_API_KEY": self.api_key,
            "KAPA_PROJECT_ID": self.project_id,
            "KAPA_INTEGRATION_ID": self.integration_id,
        }

    def bodies(self) -> list[dict]:
        return [body for _, body in self.requests]

    def fail_next(self, status: int, body: object, *, headers: dict | None = None) -> None:
        """The next request is answered `status` with the JSON `body` (then the next queued, if any)."""
        self._failures.append((status, body, headers or {}))

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/query/v1/projects/{project}/retrieval/", self._retrieval)
        app.router.add_post("/query/v1/projects/{project}/chat/", self._chat)
        app.router.add_post("/agent/v1/projects/{project}/agent/sessions/", self._session)
        app.router.add_get("/agent/v1/agent/threads/", self._thread_list)
        app.router.add_get("/agent/v1/agent/threads/{thread_id}/", self._thread_detail)

    # --- query API ------------------------------------------------------------------------------------

    async def _query_body(self, request: web.Request) -> tuple[dict, web.Response | None]:
        """The request's JSON body, kept, and Kapa's refusal of it if any."""
        try:
            body = json.loads(await request.read() or b"{}")
        except ValueError:
            body = {}
        body = body if isinstance(body, dict) else {}
        self.requests.append((request.path, body))
        if refusal := self._refusal(request, request.headers.get("X-API-KEY")):
            return body, refusal
        if not isinstance(body.get("query"), str) or not body["query"].strip():
            return body, web.json_response({"query": ["This field is required."]}, status=400)
        return body, None

    def _failure(self) -> web.Response | None:
        if not self._failures:
            return None
        status, body, headers = self._failures.pop(0)
        return web.json_response(body, status=status, headers=headers)

    def _refusal(self, request: web.Request, key: str | None) -> web.Response | None:
        if failure := self._failure():
            return failure
        if not key:
            return web.json_response({"detail": "Authentication credentials were not provided."}, status=401)
        if key != self.api_key:
            return web.json_response({"detail": "Invalid API key."}, status=401)
        if request.match_info.get("project", self.project_id) != self.project_id:
            return web.json_response({"detail": "Not found."}, status=404)
        return None

    async def _retrieval(self, request: web.Request) -> web.Response:
        body, refusal = await self._query_body(request)
        if refusal:
            return refusal
        top_k = body.get("top_k", 15)
        if not isinstance(top_k, int) or not 1 <= top_k <= 15:
            return web.json_response({"top_k": ["Ensure this value is between 1 and 15."]}, status=400)
        query = body["query"]
        self.record(Received(self.name, "search", query, detail={"top_k": top_k}))
        await asyncio.sleep(self.retrieval_seconds)
        if self.demo:
            chunks = [{"source_url": f"{DOCS_URL}{path}", "content": f"# {crumbs}\n{passage}"}
                      for crumbs, path, passage in _ranked(query)]  # fmt: skip
        else:
            chunks = [
                {
                    "source_url": f"https://docs.example.com/page-{n}",
                    "content": f"# Docs > Security > Result {n} for {query}\n## Steps\n\n"
                    + f"Passage {n} about {query}. " * 40,
                }
                for n in range(1, 16)
            ]
        return web.json_response(chunks[:top_k])

    async def _chat(self, request: web.Request) -> web.Response:
        body, refusal = await self._query_body(request)
        if refusal:
            return refusal
        user = body.get("user") if isinstance(body.get("user"), dict) else {}
        query = body["query"]
        self.questions.append((user.get("unique_client_id"), query))
        self.thread_ids.append(str(uuid.uuid4()))
        if self.demo:
            ranked = _ranked(query)
            crumbs, _, passage = ranked[0]
            text = passage.partition("\n\n")[2]  # the passage without its heading
            answer = f"{text}\n\nSee “{crumbs.rsplit(' > ', 1)[-1]}”."
            uncertain = not _overlap(query, ranked[0])
            sources = [{"source_url": f"{DOCS_URL}{path}", "title": crumbs.rsplit(" > ", 1)[-1]}
                       for crumbs, path, _ in ranked[:2]]  # fmt: skip
        else:
            answer, uncertain = f"To {query.lower()}, set the option.", False
            sources = [{"source_url": "https://docs.example.com/config", "title": "Configuration"}]
        self.record(
            Received(self.name, "question", query, body=answer,
                     detail={"owner": user.get("unique_client_id"), "thread_id": self.thread_ids[-1],
                             "integration_id": body.get("integration_id")})
        )  # fmt: skip
        return web.json_response({
            "answer": answer,
            "thread_id": self.thread_ids[-1],
            "question_answer_id": str(uuid.uuid4()),
            "is_uncertain": uncertain,
            "relevant_sources": sources,
        })  # fmt: skip

    # --- agent API ------------------------------------------------------------------------------------

    async def _session(self, request: web.Request) -> web.Response:
        if refusal := self._refusal(request, request.headers.get("X-API-Key")):
            return refusal
        try:
            body = await request.json()
        except ValueError:
            body = None
        owner = body.get("external_owner_id") if isinstance(body, dict) else None
        if not isinstance(owner, str) or not owner:
            return web.json_response({"external_owner_id": ["This field is required."]}, status=400)
        token = secrets.token_urlsafe(48)
        self._sessions[token] = owner
        if self.demo and owner not in self.threads:
            self.threads[owner] = _demo_threads()
        expires = (datetime.now(UTC) + timedelta(hours=1)).isoformat().replace("+00:00", "Z")
        return web.json_response({"session_token": token, "expires_at": expires})

    def _owner(self, request: web.Request) -> str | None:
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        return self._sessions.get(token) if scheme.lower() == "bearer" else None

    async def _thread_list(self, request: web.Request) -> web.Response:
        if failure := self._failure():
            return failure
        owner = self._owner(request)
        if owner is None:
            return web.json_response({"detail": "Invalid token."}, status=401)
        threads = self.threads.get(owner, [])
        start = int(request.query.get("cursor") or 0)
        end = start + (self.thread_page_size or int(request.query.get("page_size") or 20))
        results = [{name: t[name] for name in ("id", "title", "message_count", "last_activity_at")}
                   for t in threads[start:end]]  # fmt: skip
        return web.json_response({"results": results, "next_cursor": str(end) if end < len(threads) else None})

    async def _thread_detail(self, request: web.Request) -> web.Response:
        if failure := self._failure():
            return failure
        owner = self._owner(request)
        if owner is None:
            return web.json_response({"detail": "Invalid token."}, status=401)
        thread_id = request.match_info["thread_id"]
        self.detail_requests.append(thread_id)
        thread = next((t for t in self.threads.get(owner, []) if t["id"] == thread_id), None)
        if thread is None:
            return web.json_response({"detail": "Not found."}, status=404)
        return web.json_response(thread)


def _overlap(query: str, page: tuple[str, str, str]) -> int:
    crumbs, _, passage = page
    return len(set(_WORDS.findall(query.lower())) & set(_WORDS.findall(f"{crumbs} {passage}".lower())))


def _ranked(query: str) -> list[tuple[str, str, str]]:
    """The demo pages, most words in common with the query first."""
    return sorted(DOCS, key=lambda page: _overlap(query, page), reverse=True)


def _demo_threads() -> list[dict]:
    now = datetime.now(UTC)
    threads = []
    for number, (title, questions) in enumerate(DEMO_QUESTIONS, start=1):
        messages = []
        for question in questions:
            answer = _ranked(question)[0][2].partition("\n\n")[2]
            messages += [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
        at = (now - timedelta(days=number * 2)).isoformat().replace("+00:00", "Z")
        threads.append({"id": f"thr_demo_{number}_{secrets.token_hex(4)}", "title": title,
                        "message_count": len(messages), "last_activity_at": at, "created_at": at,
                        "messages": messages})  # fmt: skip
    return threads


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="A local Kapa answering from a few canned docs pages.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8775)
    parser.add_argument("--api-key", default=API_KEY, help="the key it accepts")
    parser.add_argument("--project-id", default=PROJECT)
    parser.add_argument("--retrieval-ms", type=float, default=0.0, help="how long Retrieval takes to answer")
    args = parser.parse_args(argv)
    Kapa(
        api_key=args.api_key,
        project_id=args.project_id,
        demo=True,
        retrieval_seconds=args.retrieval_ms / 1000,
        host=args.host,
        port=args.port,
    ).serve_until_signalled()


if __name__ == "__main__":
    main()
