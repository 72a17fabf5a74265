"""What a request may carry: JSON nested at most JSON_MAX_DEPTH deep, and no text PostgreSQL cannot store
(NUL, unpaired surrogates) in any body, path, query or header. Anything else is a clear 400, never a 500,
and nothing is saved.

The endpoints come from the OpenAPI schema, so a new one is covered (or fails here until it is described)."""

import copy
import json
from importlib import import_module
from urllib.parse import quote

import pytest
from django.conf import settings as django_settings
from django.core.cache import cache
from django.urls import include, path
from rest_framework.response import Response
from rest_framework.throttling import ScopedRateThrottle
from rest_framework.views import APIView

from chat.models import ChatMessage, ChatSession
from docs_users.models import TrackedUser
from foundation.limits import JSON_MAX_DEPTH
from leadgen.models import Lead

pytestmark = pytest.mark.django_db

CHAT_KEY = "chat-key-for-boundary-tests"
SERVICE_KEY = "mcp-key-for-boundary-tests"
DOCS_READER = "auth0|reader"
UNSTORABLE = {"NUL": "bad\x00text", "unpaired surrogate": "bad\ud800text"}

# A body each JSON endpoint accepts, and the headers that let it in: the flaws below are the only ones.
VALID = {
    "leads_create": (
        {
            "firstName": "Ada",
            "lastName": "Lovelace",
            "email": "ada@analytical.example",
            "phone": "+1 415 555 0100",
            "company": "Analytical Engines",
            "message": "We want to automate our quote-to-cash process.",
            "serviceType": "strategic_advice",
            "sourcePage": "https://example.com/services/strategy",
            "utm": {"source": "newsletter", "campaign": "autumn"},
            "steps": {"teamSize": "10-50", "tools": ["HubSpot", "Sheets"]},
            "recaptchaToken": "token",
            "sessionId": "visitor-1",
        },
        {"HTTP_X_CHAT_API_KEY": CHAT_KEY},
    ),
    "chat_stream": ({"sessionId": "visitor-1", "message": "Hello there"}, {"HTTP_X_CHAT_API_KEY": CHAT_KEY}),
    "tracking_mcp_events": (
        {
            "type": "tool_call",
            "sub": "auth0|ada",
            "tool": "search_docs",
            "context": "The user asks how to enable TLS.",
            "userAgent": "claude-code/1.0.3",
            "timestamp": "2025-01-01T00:00:00Z",
            "email": "ada@analytical.example",
            "givenName": "Ada",
            "familyName": "Lovelace",
            "orgName": "Analytical Engines",
        },
        {"HTTP_X_SERVICE_KEY": SERVICE_KEY},
    ),
    "docs_activity": ({"path": "/current/get-started/", "component": "current", "searchTerm": "tls"}, {}),
}
# Answers no matter what it is sent (a beacon that tells nothing); it must still save nothing it refuses.
ALWAYS_204 = {"docs_activity"}
# Signed by their sender over the raw bytes: a changed body is a 401 before it is read. They read the body
# through the same parser (depth, NUL, surrogates): tests/sources/test_platforms.py sends them such bodies.
SIGNED = {"sources_webhook_receive"}


@pytest.fixture(autouse=True)
def boundary_settings(settings, monkeypatch):
    for scope in list(ScopedRateThrottle.THROTTLE_RATES):  # many requests in a row, each refused on its merits
        monkeypatch.setitem(ScopedRateThrottle.THROTTLE_RATES, scope, "100000/min")
    settings.CHAT_API_KEY = CHAT_KEY
    settings.CHAT_AGENT_URL = "http://127.0.0.1:9/agent"  # configured, so a message would be saved first
    settings.CHAT_AGENT_TOKEN = "agent-token"
    settings.TRACKING_MCP_SERVICE_KEY = SERVICE_KEY
    settings.RECAPTCHA_SECRET_KEY = ""
    settings.LLM_BASE_URL = ""
    cache.clear()  # throttles
    yield
    cache.clear()


@pytest.fixture
def api(client):
    """The test client, answering 500s instead of raising them, signed in to the docs as DOCS_READER."""
    client.raise_request_exception = False
    TrackedUser.objects.create(sub=DOCS_READER, last_activity_at="2025-01-01T00:00:00Z")
    session = import_module(django_settings.SESSION_ENGINE).SessionStore()
    session["docs_sub"] = DOCS_READER
    session.save()
    client.cookies[django_settings.DOCS_SESSION_COOKIE_NAME] = session.session_key
    return client


@pytest.fixture
def schema(client):
    return client.get("/api/schema/?format=json").json()


def operations(schema):
    for route, methods in schema["paths"].items():
        for method, operation in methods.items():
            yield route, method, operation


def json_operations(schema, *, known_only=True):
    """The operations that take a JSON body; those VALID describes unless `known_only` is False (a new one
    fails test_every_json_endpoint_is_known_here until it is described)."""
    return {
        operation["operationId"]: (route, method, operation)
        for route, method, operation in operations(schema)
        if "application/json" in operation.get("requestBody", {}).get("content", {})
        and (operation["operationId"] in VALID or not known_only)
    }


def resolve(node, schema):
    while "$ref" in node:
        node = schema["components"]["schemas"][node["$ref"].rsplit("/", 1)[1]]
    return node


def string_paths(node, schema, at=()):
    """Where the request schema `node` takes text: a path of keys and list indexes for each."""
    node = resolve(node, schema)
    for alternative in node.get("oneOf", []) + node.get("anyOf", []) + node.get("allOf", []):
        yield from string_paths(alternative, schema, at)
    if node.get("type") == "string":
        yield at
    elif node.get("type") == "object":
        for name, field in node.get("properties", {}).items():
            yield from string_paths(field, schema, (*at, name))
        if isinstance(node.get("additionalProperties"), dict):
            yield from string_paths(node["additionalProperties"], schema, (*at, "anyName"))
    elif node.get("type") == "array":
        yield from string_paths(node["items"], schema, (*at, 0))


def with_value(body, at, value):
    body = copy.deepcopy(body)
    container = body
    for step, following in zip(at, at[1:], strict=False):
        if isinstance(container, dict) and not isinstance(container.get(step), dict | list):
            container[step] = [] if isinstance(following, int) else {}
        container = container[step]
    if isinstance(container, list):
        container[:] = [value]
    else:
        container[at[-1]] = value
    return body


def post(api, route, method, body, headers):
    raw = body if isinstance(body, str | bytes) else json.dumps(body)
    return getattr(api, method)(route, raw, content_type="application/json", **headers)


def nothing_saved():
    assert not Lead.objects.exists()
    assert not ChatSession.objects.exists() and not ChatMessage.objects.exists()
    assert list(TrackedUser.objects.values_list("sub", "docs_page_counts")) == [(DOCS_READER, {})]


def test_every_json_endpoint_is_known_here(schema):
    undescribed = set(json_operations(schema, known_only=False)) - set(VALID) - SIGNED
    assert not undescribed, f"add a body each accepts to VALID: {sorted(undescribed)}"
    assert set(json_operations(schema)) == set(VALID)


@pytest.mark.parametrize("kind", UNSTORABLE)
def test_text_postgresql_cannot_store_is_refused_in_every_field_of_every_json_body(api, schema, kind):
    tried = 0
    for operation_id, (route, method, operation) in json_operations(schema).items():
        body, headers = VALID[operation_id]
        request_schema = operation["requestBody"]["content"]["application/json"]["schema"]
        for at in dict.fromkeys(string_paths(request_schema, schema)):
            response = post(api, route, method, with_value(body, at, UNSTORABLE[kind]), headers)
            tried += 1
            if operation_id in ALWAYS_204:
                assert response.status_code == 204, (operation_id, at)
                continue
            assert response.status_code == 400, (operation_id, at, response.status_code)
            error = response.json()["error"]
            assert at[0] in error["fields"], (operation_id, at, error)
    assert tried > 30  # every text field of every body, the steps' answers and choices among them
    nothing_saved()


@pytest.mark.parametrize("kind", UNSTORABLE)
def test_a_field_name_postgresql_cannot_store_is_refused_too(api, schema, kind):
    for operation_id, (route, method, _) in json_operations(schema).items():
        body, headers = VALID[operation_id]
        for flawed in ({**body, UNSTORABLE[kind]: "x"}, with_value(body, ("steps",), {UNSTORABLE[kind]: "x"})):
            response = post(api, route, method, flawed, headers)
            assert response.status_code == (204 if operation_id in ALWAYS_204 else 400), operation_id
    nothing_saved()


def test_the_refusal_says_what_is_wrong_where(api):
    body, headers = VALID["chat_stream"]
    response = post(api, "/api/chat/stream", "post", {**body, "message": "hi\x00there"}, headers)
    assert response.status_code == 400
    assert response.json()["error"]["fields"] == {"message": ["Null characters are not allowed."]}
    body, headers = VALID["leads_create"]
    response = post(api, "/api/leads", "post", {**body, "utm": {"source": "news\ud800letter"}}, headers)
    assert response.status_code == 400
    assert response.json()["error"]["fields"] == {"utm": {"source": ["Unpaired surrogates are not allowed."]}}
    nothing_saved()


def nested(depth: int) -> str:
    """A JSON object whose `message` holds lists nested until the whole body is `depth` deep."""
    return '{"message": ' + "[" * (depth - 1) + "]" * (depth - 1) + "}"


@pytest.mark.parametrize("body", ["[" * 1000 + "]" * 1000, "[" * 5000 + "]" * 5000, nested(JSON_MAX_DEPTH + 1)])
def test_json_nested_past_the_limit_is_refused_by_every_json_endpoint(api, schema, body):
    for operation_id, (route, method, _) in json_operations(schema).items():
        response = post(api, route, method, body, VALID[operation_id][1])
        if operation_id in ALWAYS_204:
            assert response.status_code == 204
            continue
        assert response.status_code == 400, (operation_id, response.status_code)
        error = response.json()["error"]
        assert error["code"] == "parse_error", operation_id
        assert f"nested more than {JSON_MAX_DEPTH} levels" in error["message"], operation_id
    nothing_saved()


class Echo(APIView):
    def post(self, request):
        return Response({"received": request.data})


urlpatterns = [path("echo", Echo.as_view()), path("", include("config.urls"))]


@pytest.mark.urls("tests.security.test_input_boundary")
def test_the_depth_limit_is_exactly_json_max_depth(api):
    within = api.post("/echo", nested(JSON_MAX_DEPTH), content_type="application/json")
    assert within.status_code == 200 and json.loads(nested(JSON_MAX_DEPTH)) == within.json()["received"]
    beyond = api.post("/echo", nested(JSON_MAX_DEPTH + 1), content_type="application/json")
    assert beyond.status_code == 400 and beyond.json()["error"]["code"] == "parse_error"
    # Brackets inside text are text, not nesting.
    text = api.post("/echo", json.dumps({"message": "[" * 100 + "{"}), content_type="application/json")
    assert text.status_code == 200


def parameter_requests(schema):
    """(operation, parameter, request) for each path, query and header parameter given a NUL in turn."""
    for route, method, operation in operations(schema):
        parameters = operation.get("parameters", [])
        plain = {p["name"]: "visitor-1" for p in parameters if p["in"] == "path"}
        for parameter in parameters:
            name, where = parameter["name"], parameter["in"]
            if where not in ("path", "query", "header"):
                continue
            values = {**plain, **({name: "bad\x00text"} if where == "path" else {})}
            url = route.format(**{key: quote(value, safe="") for key, value in values.items()})
            query = {name: "bad\x00text"} if where == "query" else {}
            headers = {"HTTP_" + name.upper().replace("-", "_"): "bad\x00text"} if where == "header" else {}
            yield operation["operationId"], name, (method, url, query, headers)


def test_text_postgresql_cannot_store_is_refused_in_every_path_query_and_header_parameter(api, schema):
    tried = set()
    for operation_id, name, (method, url, query, headers) in parameter_requests(schema):
        headers.setdefault("HTTP_X_CHAT_API_KEY", CHAT_KEY)
        if method == "get":
            response = api.get(url, query, **headers)
        else:
            response = getattr(api, method)(url + "?" + "&".join(f"{k}={quote(v)}" for k, v in query.items()),
                                            **headers)  # fmt: skip
        assert response.status_code == 400, (operation_id, name, response.status_code)
        fields = response.json()["error"]["fields"]  # header names in any case, as HTTP has them
        assert {key.lower(): value for key, value in fields.items()} == {
            name.lower(): ["Null characters are not allowed."]
        }, (operation_id, name)
        tried.add((operation_id, name))
    assert ("chat_transcript", "session_id") in tried and ("leads_lookup", "sessionId") in tried
    assert len(tried) > 20
    nothing_saved()


@pytest.mark.parametrize("session_id", ["visitor-1\n", " visitor-1", "visitor-1 ", "\tvisitor-1", "visitor 1", ""])
def test_the_chat_session_id_is_taken_exactly_as_sent_or_refused_wherever_it_is_given(api, session_id):
    body, headers = VALID["chat_stream"]
    stream = post(api, "/api/chat/stream", "post", {**body, "sessionId": session_id}, headers)
    body, headers = VALID["leads_create"]
    lead = post(api, "/api/leads", "post", {**body, "sessionId": session_id}, headers)
    answers = [stream, lead]
    if session_id:  # the lookup reads an empty one as none, as its schema says
        query = {"email": "ada@analytical.example", "sessionId": session_id}
        answers.append(api.get("/api/leads/lookup", query, HTTP_X_CHAT_API_KEY=CHAT_KEY))
    for response in answers:
        assert response.status_code == 400
        assert list(response.json()["error"]["fields"]) == ["sessionId"]
    nothing_saved()
