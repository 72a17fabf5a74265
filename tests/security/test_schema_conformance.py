"""The OpenAPI schema is the contract: every operation in it, fuzzed by schemathesis with every check
(`--checks all`, its coverage phase included: undeclared methods, missing headers…), with what each needs to
answer for real (WordPress, the chat agent, keys); then the places where code and schema once disagreed,
pinned.

The fuzzing leaves out only what the table EXCEPTIONS says, each with its reason, and an operation added
to the schema is fuzzed here without anyone listing it. The streams go through the ASGI application daphne
serves (under WSGI Django would read a stream to its end, and the chat's relay would die with the view's
event loop); the rest through the WSGI application, in the test's transaction, which is faster.
"""

import json
import re
import uuid
import zlib
from urllib.parse import quote

import jsonschema
import pytest
import schemathesis
from django.conf import settings as django_settings
from django.core.cache import cache
from django.test import Client
from hypothesis import HealthCheck, settings
from rest_framework.throttling import SimpleRateThrottle
from schemathesis.checks import negative_data_rejection, positive_data_acceptance

from chat.services import chat_turn_start
from config.asgi import application as asgi_application
from config.wsgi import application as wsgi_application
from leadgen.models import Lead
from prototypes.models import Prototype, PrototypeEvent
from sources.models import InboundSource
from standins.agent import Agent
from standins.platforms import standard_webhooks_secret
from standins.wordpress import WordPress
from tests.chat.conftest import chat_request
from tests.fuzzing import PHONES, carries_unstorable_text, holds
from tests.prototypes.conftest import make_lead

CHAT_KEY = "chat-key-for-fuzzing"
SERVICE_KEY = "mcp-key-for-fuzzing"
CACHE_KEY = "cache-key-for-fuzzing"
INVOKE_SECRET = "invoke-secret-for-fuzzing"
# Keys the schema names as headers: a generated value is replaced by the right one, to explore past the check.
KEYS = {"X-Chat-Api-Key": CHAT_KEY, "X-Service-Key": SERVICE_KEY, "X-Cache-Api-Key": CACHE_KEY}

STREAMS = ["chat_stream", "leads_generate_stream"]
schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", wsgi_application)
streaming_schema = schemathesis.openapi.from_dict(schema.raw_schema)
streaming_schema.app = asgi_application  # as the loaders set it: the same schema, called through ASGI

COMPLETED, FAILED, WITHOUT_PROTOTYPE = (str(uuid.UUID(int=n)) for n in (101, 102, 103))
KNOWN_LEADS = [COMPLETED, FAILED, WITHOUT_PROTOTYPE]
KNOWN_SESSION = "fuzz-session-1"
# Inbound sources that exist: a generic one (its POST reaches the signature check) and a Facebook one (its GET
# reaches the handshake).
KNOWN_SOURCES = [str(uuid.UUID(int=n)) for n in (201, 202)]


@pytest.fixture(scope="module")
def wordpress_server():
    """One fake WordPress for the module: its posts are only read here (starting one per test costs more)."""
    with WordPress() as fake:
        yield fake


@pytest.fixture
def blog(settings, wordpress_server):
    settings.WORDPRESS_API_URL = wordpress_server.api_url
    settings.WORDPRESS_TIMEOUT_SECONDS = 1.0
    settings.SITE_URL = "https://www.example.com"
    cache.clear()  # posts answers are cached: each test asks WordPress afresh


@pytest.fixture
def world(settings, monkeypatch, blog):
    """Everything the operations reach, configured and running (the chat agent: see `agent`); throttles out
    of the way."""
    settings.TRUSTED_PROXY_COUNT = 1  # each request says its client in X-Forwarded-For, as behind one proxy
    settings.CHAT_API_KEY = CHAT_KEY
    settings.TRACKING_MCP_SERVICE_KEY = SERVICE_KEY
    settings.BLOG_CACHE_API_KEY = CACHE_KEY
    settings.CRM_INVOKE_SECRET = INVOKE_SECRET
    settings.RECAPTCHA_SECRET_KEY = ""
    settings.LLM_BASE_URL = ""
    settings.CHAT_AGENT_TOKEN = "agent-token"
    settings.CHAT_STREAM_RATE_PER_SESSION = settings.CHAT_STREAM_RATE_PER_IP = "100000/min"
    settings.PROTOTYPES_STREAM_RATE = "100000/min"
    for scope in django_settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"] | SimpleRateThrottle.THROTTLE_RATES:
        monkeypatch.setitem(SimpleRateThrottle.THROTTLE_RATES, scope, "100000/min")
    settings.CHAT_AGENT_URL = ""  # a message is answered 503 before anything is saved, unless `agent` runs
    known_leads()
    chat_turn_start(session_id=KNOWN_SESSION, client_ip=None, content="Do you build prototypes?")
    # The same primary keys in every test: a web process keeps an active source for a few seconds, and a test's
    # rollback is no delete it would hear of.
    for pk, public_id, kind in zip((201, 202), KNOWN_SOURCES, ("generic", "facebook"), strict=True):
        InboundSource.objects.create(
            pk=pk, public_id=public_id, name=kind, kind=kind, secret=standard_webhooks_secret(),
            verify_token="fuzz-token",
        )  # fmt: skip


@pytest.fixture
def agent(settings):
    running = Agent().start()
    settings.CHAT_AGENT_URL = running.url
    yield running
    running.stop()


def known_leads():
    """Leads whose progress streams end by themselves: completed, failed, and one without a prototype."""
    for public_id, state, kind, data in (
        (COMPLETED, "completed", "complete", {"state": "completed", "previewUrl": "https://p.example", "title": "T"}),
        (FAILED, "failed", "error", {"state": "failed", "message": "We could not finish it."}),
    ):
        number = uuid.UUID(public_id).int
        lead = make_lead(email=f"{number}@example.com", client_ip=f"192.0.2.{number}")
        Lead.objects.filter(pk=lead.pk).update(public_id=public_id)
        progress = {"state": "generating", "status": "Starting your prototype", "title": "", "step": 0}
        PrototypeEvent.objects.create(prototype=lead.prototype, number=1, kind="progress", data=progress)
        PrototypeEvent.objects.create(prototype=lead.prototype, number=2, kind=kind, data=data)
        Prototype.objects.filter(pk=lead.prototype.pk).update(state=state, events=2, preview_url="https://p.example")
    lead = make_lead(service_type="dedicated_team", email="none@example.com", client_ip="192.0.2.200")
    Lead.objects.filter(pk=lead.pk).update(public_id=WITHOUT_PROTOTYPE)


def aim(case):
    """Point a request the schema allows at things that exist, and give keys their right value."""
    for header, value in KEYS.items():
        if header in (case.headers or {}):
            case.headers[header] = value
    if "Idempotency-Key" in (case.headers or {}):
        # A key reused with another body is refused (422) by design: a property of earlier requests, not of
        # this one, so each generated request gets its own key.
        case.headers["Idempotency-Key"] = str(uuid.uuid4())
    positive = case.meta is not None and case.meta.generation.mode.is_positive
    for name, known in (("lead_id", KNOWN_LEADS), ("session_id", [KNOWN_SESSION]), ("public_id", KNOWN_SOURCES)):
        value = (case.path_parameters or {}).get(name)
        if positive and isinstance(value, str):
            # Chosen by the generated value, so that a request hypothesis replays is the same request.
            pick = zlib.crc32(value.encode("utf-8", "replace")) % (len(known) + 1)
            case.path_parameters[name] = known[pick] if pick < len(known) else value


def excluded(case) -> list:
    """The checks EXCEPTIONS leave out for this request."""
    return [check for check, applies in EXCEPTIONS if applies(case)]


PERCENT_ESCAPE = re.compile("%[0-9A-Fa-f]{2}")
# (check left out, when): each a rule of the API that OpenAPI 3.0 cannot state, or a request schemathesis
# labels valid although the schema refuses it.
EXCEPTIONS = [
    # The docs beacon answers 204 to anything by design (docs_users.api.DocsActivityView): it refuses nothing
    # visibly, so no invalid request of it can be seen refused.
    (negative_data_rejection, lambda case: case.operation.path == "/docs-activity"),
    # Text PostgreSQL cannot store is refused in every input (tests.fuzzing.carries_unstorable_text).
    (positive_data_acceptance, carries_unstorable_text),
    # WordPress orders by relevance only a search: a rule between two parameters. A search of whitespace alone
    # (control characters such as U+001D included, as str.strip() reads them) is trimmed to none.
    (
        positive_data_acceptance,
        lambda case: (
            (case.query or {}).get("orderby") == "relevance" and not str((case.query or {}).get("search", "")).strip()
        ),
    ),
    # Schemathesis decodes a `%XX` in a generated path parameter before encoding it (to keep its quoting
    # idempotent): a slug generated with "%ff" is sent as U+FFFD, another request than the one it judged.
    (
        positive_data_acceptance,
        lambda case: any(holds(value, PERCENT_ESCAPE) for value in (case.path_parameters or {}).values()),
    ),
    # Schemathesis' coverage phase sends any text as a `phone` (it does not use the format's strategy), which
    # the schema's format refuses.
    (
        positive_data_acceptance,
        lambda case: isinstance(case.body, dict) and case.body.get("phone", "") not in PHONES,
    ),
]


def call_and_validate(case):
    aim(case)
    if case.meta is not None and case.meta.generation.mode.is_positive and case.body is not None:
        # Judged again against the schema, which schemathesis does for any part a test changes: some bodies it
        # generates as valid break a keyword (`propertyNames`), and the schema is the judge.
        case.body = case.body
    headers = {"X-Forwarded-For": "198.51.100.7"}
    if case.operation.path.startswith("/internal/"):
        headers["Authorization"] = f"Bearer {INVOKE_SECRET}"
    case.call_and_validate(headers=headers, excluded_checks=excluded(case))


FUZZING = settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))


@pytest.mark.django_db
@pytest.mark.usefixtures("keep_the_test_transaction", "world")
@schema.exclude(operation_id=STREAMS).parametrize()
@FUZZING
def test_every_operation_answers_as_its_schema_says(case):
    call_and_validate(case)


@pytest.mark.django_db(transaction=True)  # the app reads in threads of its own: it sees committed rows only
@pytest.mark.usefixtures("world", "agent")
@streaming_schema.include(operation_id=STREAMS).parametrize()
@FUZZING
def test_every_stream_answers_as_its_schema_says(case):
    call_and_validate(case)


# --- where code and schema disagreed, pinned ---------------------------------------------------------

UNDECLARED_METHODS = {"GET", "POST", "PUT", "PATCH", "DELETE"}
PATH_VALUES = {"{lead_id}": COMPLETED, "{session_id}": KNOWN_SESSION, "{slug}": "post-1"}


def concrete(route: str) -> str:
    """The route with a value for each path parameter (an id, for those not named above)."""
    return re.sub(r"\{[^}]+\}", lambda found: PATH_VALUES.get(found.group(), str(uuid.uuid4())), route)


@pytest.fixture
def api_schema(client):
    return client.get("/api/schema/?format=json").json()


def patterns(node) -> list[str]:
    """Every `pattern` of the schema."""
    if isinstance(node, list):
        return [pattern for item in node for pattern in patterns(item)]
    if not isinstance(node, dict):
        return []
    own = [node["pattern"]] if isinstance(node.get("pattern"), str) else []
    return own + [pattern for value in node.values() for pattern in patterns(value)]


@pytest.mark.django_db
def test_no_pattern_leans_on_a_whitespace_class(api_schema):
    """A client reads a pattern as ECMAScript, whose \\s is not Python's (U+001F is whitespace to our checks, not
    to it): "\\u001f" passed the schema's `\\S` and was refused as blank. Patterns spell the class out
    (foundation.api.WHITESPACE)."""
    found = patterns(api_schema)
    assert found, "the schema states patterns"
    assert [p for p in found if re.search(r"(?<!\\)\\[sS]", p)] == []


def allowed(response) -> set:
    return {method.strip() for method in response["Allow"].split(",")} - {"HEAD", "OPTIONS"}


@pytest.mark.django_db
def test_an_undeclared_method_is_the_json_405_and_allow_names_the_schemas_methods(api_schema):
    browser = Client(enforce_csrf_checks=True)  # as a cross-site form meets the CSRF middleware
    for route, operations in api_schema["paths"].items():
        declared = {method.upper() for method in operations}
        url = concrete(route)
        for method in sorted(UNDECLARED_METHODS - declared):
            response = browser.generic(method, url)
            assert response.status_code == 405, (method, route, response.status_code)
            assert response.json()["error"]["code"] == "method_not_allowed", (method, route)
            assert allowed(response) == declared, (method, route)
        assert allowed(browser.options(url)) == declared, route


def sse_events(body: bytes) -> list[dict]:
    """The events as an SSE client reads them: comment lines skipped, one dict of fields per event."""
    events = []
    for block in body.decode().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.split("\n") if line and not line.startswith(":"))
        if fields:
            events.append(fields)
    return events


@pytest.mark.django_db(transaction=True)  # the relay saves the answer from a thread of its own
@pytest.mark.parametrize("mode", ["stream", "error"])
def test_the_chat_streams_events_are_what_its_schema_says(api_schema, settings, agent, mode):
    answer = api_schema["paths"]["/api/chat/stream"]["post"]["responses"]["200"]
    event_schema = answer["content"]["text/event-stream"]["schema"]
    settings.CHAT_API_KEY, settings.CHAT_AGENT_TOKEN = CHAT_KEY, "agent-token"
    agent.mode = mode
    result = chat_request({"sessionId": "conformance-1", "message": "Hello?"}, key=CHAT_KEY)
    events = sse_events(result.body)
    assert result.status == 200 and {event["event"] for event in events} >= {"token"}
    for event in events:
        jsonschema.validate(event, event_schema)
        assert isinstance(json.loads(event["data"]), dict)


def matches(schema: dict, value: str) -> bool:
    """A string `schema` as JSON Schema reads it: its `pattern`'s `$` is the end, never before a newline."""
    pattern = schema.get("pattern")
    if pattern is not None and re.fullmatch(pattern.removeprefix("^").removesuffix("$"), value) is None:
        return False
    return len(value) <= schema.get("maxLength", len(value))


def schema_accepts(parameter: dict, value: str) -> bool:
    schema = parameter["schema"]
    assert "pattern" in json.dumps(schema), "the schema states the parameter's pattern"
    if "oneOf" in schema:
        return sum(matches(alternative, value) for alternative in schema["oneOf"]) == 1
    return matches(schema, value)


LIST_PARAMETERS = [
    ("categories", "3,7", True),
    ("categories", "", True),
    ("categories", ",".join(str(n) for n in range(1, 21)), True),
    ("categories", "3, 7", False),
    ("categories", "3,,7", False),
    ("categories", "03", False),
    ("categories", "3\n", False),
    ("categories", "1000000000", False),
    ("categories", ",".join(str(n) for n in range(1, 22)), False),
    ("tags", "7", True),
    ("tags", "x", False),
    ("_fields", "id,slug", True),
    ("_fields", "", True),
    ("_fields", "id, slug", False),
    ("_fields", "id,password", False),
    ("_fields", "id,\n", False),
]


@pytest.mark.django_db
@pytest.mark.usefixtures("blog")
def test_the_posts_lists_take_exactly_what_their_schema_pattern_says(client, api_schema):
    parameters = {parameter["name"]: parameter for parameter in api_schema["paths"]["/api/posts"]["get"]["parameters"]}
    for name, value, valid in LIST_PARAMETERS:
        assert schema_accepts(parameters[name], value) == valid, (name, value)
        response = client.get("/api/posts", {name: value})
        assert response.status_code == (200 if valid else 400), (name, value, response.content)
        if not valid:
            assert list(response.json()["error"]["fields"]) == [name]


@pytest.mark.django_db
@pytest.mark.usefixtures("blog")
def test_a_post_slug_is_taken_exactly_as_its_schema_pattern_says(client, api_schema):
    (parameter,) = [p for p in api_schema["paths"]["/api/posts/{slug}"]["get"]["parameters"] if p["name"] == "slug"]
    for slug, valid in [("post-1", True), ("café", True), ("caf%c3%a9", True), ("a b", False), ("a\x1b", False)]:
        assert schema_accepts(parameter, slug) == valid, slug
        response = client.get(f"/api/posts/{quote(slug)}")
        assert (response.status_code != 400) == valid, (slug, response.content)


@pytest.mark.django_db(transaction=True)  # the stream reads in threads of its own
def test_a_last_event_id_of_other_digits_counts_as_none(client):
    known_leads()
    response = client.get(f"/api/leads/{COMPLETED}/generate-stream", {"lastEventId": "²"})  # "²".isdigit()
    assert response.status_code == 200 and response["Content-Type"] == "text/event-stream"
