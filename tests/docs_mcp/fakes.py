"""Local stand-ins for the MCP server's outside services, on pytest-httpserver, in their real shapes.

- Auth0: the tenant's JWKS at `/.well-known/jwks.json` and its discovery document; access tokens for
  our API are RS256 JWTs signed with the tenant key (`mint`), as Auth0 issues them for an API audience:
  `iss` the tenant URL with a trailing slash, `aud` the API identifier (and, with `openid`, the
  userinfo URL), `azp` the client, `scope`, `iat`/`exp`.
- Kapa's query API, header `X-API-KEY`: Retrieval (`POST /query/v1/projects/{id}/retrieval/`) and
  Chat (`POST /query/v1/projects/{id}/chat/`), with Kapa's error answers; every request body kept.
- The docs site: HTML pages.
"""

import json
import time
import uuid

from joserfc import jwt
from joserfc.jwk import RSAKey
from werkzeug import Request, Response

from tests.fake_oidc import rsa_signing_key

AUDIENCE = "https://api.docs.example.com/mcp"
PROJECT = "proj-1"
API_KEY = "kapa-key-1"
TENANT_KEY = rsa_signing_key("tenant-key-1")


class FakeAuth0:
    def __init__(self, httpserver):
        self.issuer = httpserver.url_for("/")
        httpserver.expect_request("/.well-known/jwks.json", method="GET").respond_with_json(
            {"keys": [TENANT_KEY.as_dict(private=False)]}
        )

    @property
    def domain(self) -> str:
        return self.issuer.rstrip("/")

    def mint(self, subject: str, *, key: RSAKey = TENANT_KEY, **overrides) -> str:
        now = int(time.time())
        claims = {
            "iss": self.issuer,
            "sub": subject,
            "aud": [AUDIENCE, f"{self.issuer}userinfo"],
            "azp": "mcp-client-1",
            "scope": "openid profile email",
            "iat": now,
            "exp": now + 3600,
            **overrides,
        }
        claims = {name: value for name, value in claims.items() if value is not None}
        return jwt.encode({"alg": "RS256", "typ": "JWT", "kid": key.kid}, claims, key, algorithms=["RS256"])


class FakeKapa:
    """Kapa's Retrieval and Chat as Kapa's docs and its own clients (LangChain, n8n) show them.

    Retrieval takes `{"query", "top_k" (1-15), ...}` and answers a JSON list of `{"source_url",
    "content"}`, best first; content is Markdown led by the chunk's breadcrumb heading. Chat takes
    `{"query", "user": {"unique_client_id", ...}, ...}`, starts a thread and answers `{"answer",
    "thread_id", "question_answer_id", "is_uncertain", "relevant_sources": [{"source_url", "title"}]}`.
    A missing or unknown key is 401, bad input 400 with a list of messages per field, as Kapa's
    REST framework answers.
    """

    def __init__(self, httpserver):
        self.requests: list[tuple[str, dict]] = []  # (path, JSON body) of every call
        self.questions: list[tuple[str | None, str]] = []  # (the user's unique_client_id, question)
        self.thread_ids: list[str] = []  # of the threads Chat started, in order
        self.retrieval_seconds = 0.0  # how long Retrieval takes to answer
        for path, handler in (
            (f"/query/v1/projects/{PROJECT}/retrieval/", self._retrieval),
            (f"/query/v1/projects/{PROJECT}/chat/", self._chat),
        ):
            httpserver.expect_request(path, method="POST").respond_with_handler(handler)

    def bodies(self) -> list[dict]:
        return [body for _, body in self.requests]

    def _keep(self, request: Request) -> dict:
        body = json.loads(request.get_data() or b"{}")
        self.requests.append((request.path, body))
        return body

    def _refusal(self, request: Request, body: dict) -> Response | None:
        key = request.headers.get("X-API-KEY")
        if not key:
            return _json({"detail": "Authentication credentials were not provided."}, status=401)
        if key != API_KEY:
            return _json({"detail": "Invalid API key."}, status=401)
        if not isinstance(body.get("query"), str) or not body["query"].strip():
            return _json({"query": ["This field is required."]}, status=400)
        return None

    def _retrieval(self, request: Request) -> Response:
        body = self._keep(request)
        if refusal := self._refusal(request, body):
            return refusal
        top_k = body.get("top_k", 15)
        if not isinstance(top_k, int) or not 1 <= top_k <= 15:
            return _json({"top_k": ["Ensure this value is between 1 and 15."]}, status=400)
        query = body["query"]
        time.sleep(self.retrieval_seconds)
        chunks = [
            {
                "source_url": f"https://docs.example.com/page-{n}",
                "content": f"# Docs > Security > Result {n} for {query}\n## Steps\n\n"
                + f"Passage {n} about {query}. " * 40,
            }
            for n in range(1, 16)
        ]
        return _json(chunks[:top_k])

    def _chat(self, request: Request) -> Response:
        body = self._keep(request)
        if refusal := self._refusal(request, body):
            return refusal
        user = body.get("user") if isinstance(body.get("user"), dict) else {}
        self.questions.append((user.get("unique_client_id"), body["query"]))
        self.thread_ids.append(str(uuid.uuid4()))
        return _json({
            "answer": f"To {body['query'].lower()}, set the option.",
            "thread_id": self.thread_ids[-1],
            "question_answer_id": str(uuid.uuid4()),
            "is_uncertain": False,
            "relevant_sources": [{"source_url": "https://docs.example.com/config", "title": "Configuration"}],
        })  # fmt: skip


DOCS_PAGE = """<!doctype html><html><head><title>Enable TLS | Docs</title><style>p{color:red}</style></head>
<body><nav>Home</nav><h1>Enable TLS</h1><script>track()</script>
<p>Set <code>tls.enabled</code> to true.</p></body></html>"""


def serve_docs_site(httpserver) -> None:
    httpserver.expect_request("/docs/tls").respond_with_data(DOCS_PAGE, content_type="text/html; charset=utf-8")
    httpserver.expect_request("/docs/old-tls").respond_with_data("", status=301, headers={"Location": "/docs/tls"})
    httpserver.expect_request("/docs/away").respond_with_data(
        "", status=302, headers={"Location": "http://169.254.169.254/latest/meta-data/"}
    )


def _json(body, *, status: int = 200) -> Response:
    return Response(json.dumps(body), status=status, content_type="application/json")
