"""First-party capture: docs page views, MCP sign-ins and tool calls, and the pending marker they set."""

import threading
import time
from datetime import UTC, datetime, timedelta
from importlib import import_module

import pytest
from django.conf import settings
from django.core.cache import cache
from django.db import connection, transaction
from django.utils import timezone

from docs_users import activity
from docs_users.models import TrackedUser
from tests.conftest import minute_with_time_left

pytestmark = pytest.mark.django_db

SERVICE_KEY = "mcp-service-key-for-tests"


@pytest.fixture(autouse=True)
def capture_settings(settings):
    settings.TRACKING_MCP_SERVICE_KEY = SERVICE_KEY
    cache.clear()  # throttles
    yield
    cache.clear()


@pytest.fixture
def ada():
    return activity.tracked_user_sign_in(
        sub="auth0|ada", channel="docs-login", email="ada@acme.com", given_name="Ada", family_name="Lovelace"
    )


def docs_client(client, sub):
    """A browser signed in to the docs: its docs session (its own cookie) carries the reader's sub."""
    session = import_module(settings.SESSION_ENGINE).SessionStore()
    session["docs_sub"] = sub
    session.save()
    client.cookies[settings.DOCS_SESSION_COOKIE_NAME] = session.session_key
    return client


def mcp_event(client, body, key=SERVICE_KEY):
    headers = {"HTTP_X_SERVICE_KEY": key} if key is not None else {}
    return client.post("/api/tracking/mcp-events", body, content_type="application/json", **headers)


@pytest.mark.parametrize(
    ("email", "org", "company"),
    [
        ("ada@acme.com", "", "Acme"),
        ("ada@eu.acme-labs.co.uk", "", "Acme Labs"),
        ("ada@gmail.com", "", ""),
        ("ada@mailinator.com", "", ""),  # disposable
        ("ada@gmail.com", "Analytical Engines Ltd", "Analytical Engines Ltd"),
    ],
)
def test_company_is_the_organization_else_the_email_domain_never_a_mailbox_provider(email, org, company):
    user = activity.tracked_user_sign_in(sub="auth0|1", channel="docs-login", email=email, org_name=org)
    assert user.company == company


def test_a_sign_in_creates_then_updates_the_user_and_the_latest_channel_wins():
    first = datetime(2026, 11, 1, 9, tzinfo=UTC)
    activity.tracked_user_sign_in(sub="auth0|1", channel="docs-login", email="ada@acme.com", given_name="Ada", at=first)
    user = activity.tracked_user_sign_in(
        sub="auth0|1", channel="mcp", user_agent="claude-code/1.0.3 (external, cli)", at=first + timedelta(days=1)
    )
    assert (user.email, user.given_name, user.signed_up_at) == ("ada@acme.com", "Ada", first)  # empty claims keep
    assert (user.last_channel, user.last_sign_in_at, user.mcp_client) == (
        "mcp",
        first + timedelta(days=1),
        "Claude Code",
    )
    assert user.is_pending


@pytest.mark.parametrize(
    ("user_agent", "client_name"),
    [("Cursor/0.42.3 (darwin arm64)", "Cursor"), ("Windsurf/1.2", "Windsurf"), ("acme-agent/2.0", "acme-agent")],
)
def test_the_mcp_client_comes_from_the_user_agent(user_agent, client_name):
    assert activity.mcp_client_from_user_agent(user_agent) == client_name


def test_docs_page_views_keep_recent_pages_counts_areas_getting_started_and_searches(client, ada):
    docs = docs_client(client, ada.sub)
    views = [
        {"path": "/current/get-started/quick-start/", "component": "redpanda"},
        {"path": "/redpanda-cloud/get-started/", "searchTerm": "  cloud   quickstart "},
        {"path": "/current/manage/forget-started-things/"},  # not a get-started segment
        {"path": "/redpanda-connect/home/"},  # no component: the first path segment is the area
        {"path": "/current/get-started/quick-start/", "component": "redpanda"},
    ]
    for view in views:
        assert docs.post("/docs-activity", view, content_type="application/json").status_code == 204

    user = TrackedUser.objects.get(sub=ada.sub)
    assert user.docs_recent_pages[:2] == ["/current/get-started/quick-start/", "/redpanda-connect/home/"]
    assert len(user.docs_recent_pages) == 4
    assert user.docs_page_counts["/current/get-started/quick-start/"] == 2
    assert user.docs_product_areas == {"redpanda": 2, "redpanda-cloud": 1, "current": 1, "redpanda-connect": 1}
    assert user.docs_getting_started_visits == 3
    assert user.docs_search_terms == ["cloud quickstart"]
    assert user.is_pending and user.docs_last_active_at is not None


def test_docs_lists_and_counts_stay_capped(ada):
    for n in range(activity.PAGE_COUNTS_CAP + 30):
        activity.docs_page_view_record(sub=ada.sub, path=f"/p/{n}", search_term=f"query {n}")
    activity.docs_page_view_record(sub=ada.sub, path="/p/0")
    user = TrackedUser.objects.get(sub=ada.sub)
    assert len(user.docs_recent_pages) == activity.RECENT_PAGES_CAP
    assert len(user.docs_page_counts) == activity.PAGE_COUNTS_CAP
    assert "/p/0" in user.docs_page_counts  # the page just viewed always stays
    assert len(user.docs_search_terms) == activity.SEARCH_TERMS_CAP
    assert user.docs_search_terms[0] == f"query {activity.PAGE_COUNTS_CAP + 29}"


@pytest.mark.parametrize(
    "body",
    [
        {"path": "/current/"},
        {"path": ["not", "text"]},
        {},
        "not json",
        {"path": "x" * 10_000},
    ],
)
def test_docs_activity_answers_204_whatever_the_auth_state_and_records_nothing_anonymous(client, ada, body):
    client.cookies["sessionid"] = "forged-or-expired"
    response = client.post("/docs-activity", body, content_type="application/json")
    assert response.status_code == 204 and response.content == b""
    assert TrackedUser.objects.get(sub=ada.sub).docs_recent_pages == []


@pytest.mark.parametrize("body", [{"path": ["not", "text"]}, "not json", {"path": "x" * 10_000}])
def test_docs_activity_answers_204_to_a_signed_in_bad_body_and_records_nothing(client, ada, body):
    response = docs_client(client, ada.sub).post("/docs-activity", body, content_type="application/json")
    assert response.status_code == 204 and response.content == b""
    assert TrackedUser.objects.get(sub=ada.sub).docs_recent_pages == []


def test_docs_activity_ignores_cross_site_posts(client, ada):
    response = docs_client(client, ada.sub).post(
        "/docs-activity", {"path": "/x/"}, content_type="application/json", HTTP_SEC_FETCH_SITE="cross-site"
    )
    assert response.status_code == 204
    assert TrackedUser.objects.get(sub=ada.sub).docs_recent_pages == []


def test_docs_activity_over_the_session_rate_is_dropped_quietly(client, ada, monkeypatch):
    from rest_framework.throttling import SimpleRateThrottle

    monkeypatch.setitem(SimpleRateThrottle.THROTTLE_RATES, "docs_activity", "3/min")
    minute_with_time_left()
    docs = docs_client(client, ada.sub)
    answers = {
        docs.post("/docs-activity", {"path": f"/{n}/"}, content_type="application/json").status_code for n in range(5)
    }
    assert answers == {204}
    assert len(TrackedUser.objects.get(sub=ada.sub).docs_recent_pages) == 3


def test_mcp_tool_calls_count_per_tool_and_keep_capped_agent_context(client):
    at = timezone.now() - timedelta(minutes=5)
    for tool, context in [("search_docs", "find the retention setting"), ("search_docs", ""), ("ask_kapa", "")]:
        body = {"sub": "auth0|bob", "tool": tool, "userAgent": "Cursor/0.42", "timestamp": at.isoformat()}
        assert mcp_event(client, {**body, "context": context}).status_code == 204

    user = TrackedUser.objects.get(sub="auth0|bob")
    assert user.mcp_tool_counts == {"search_docs": 2, "ask_kapa": 1}
    assert user.mcp_agent_intents == [
        {"tool": "search_docs", "context": "find the retention setting", "at": at.isoformat()}
    ]
    assert (user.mcp_client, user.mcp_last_tool_at, user.last_activity_at) == ("Cursor", at, at)
    assert user.is_pending

    for n in range(activity.AGENT_INTENTS_CAP + 5):
        activity.mcp_tool_call_record(sub="auth0|bob", tool="search_docs", context=f"intent {n} " + "x" * 1000)
    intents = TrackedUser.objects.get(sub="auth0|bob").mcp_agent_intents
    assert len(intents) == activity.AGENT_INTENTS_CAP
    assert all(len(intent["context"]) <= activity.TEXT_CAP for intent in intents)


def test_a_batch_of_tool_calls_of_several_users_is_recorded_as_if_one_by_one(ada):
    earlier, later = datetime(2026, 11, 2, 9, 0, tzinfo=UTC), datetime(2026, 11, 2, 9, 5, tzinfo=UTC)
    users = activity.mcp_tool_calls_record([
        activity.McpToolCall(sub=ada.sub, tool="search_docs", context="first reason", at=earlier),
        activity.McpToolCall(sub="auth0|new", tool="ask_docs", client_name="Goose", at=earlier),
        activity.McpToolCall(sub=ada.sub, tool="search_docs", context="second reason", at=later),
        activity.McpToolCall(sub=ada.sub, tool="get_page", user_agent="claude-code/1.0", at=earlier),
    ])  # fmt: skip
    assert set(users) == {ada.sub, "auth0|new"}
    ada_now, new = TrackedUser.objects.get(sub=ada.sub), TrackedUser.objects.get(sub="auth0|new")
    assert ada_now.mcp_tool_counts == {"search_docs": 2, "get_page": 1}
    assert [intent["context"] for intent in ada_now.mcp_agent_intents] == ["second reason", "first reason"]
    assert ada_now.mcp_last_tool_at == later and ada_now.mcp_client == "Claude Code"
    assert ada_now.email == "ada@acme.com"  # columns a tool call does not change are left as they were
    assert (new.mcp_tool_counts, new.mcp_client, new.last_channel) == ({"ask_docs": 1}, "Goose", "mcp")
    assert new.signed_up_at == earlier and new.is_pending and ada_now.is_pending


def test_a_batch_adds_new_tools_only_up_to_the_cap_in_the_order_of_first_calls_and_counts_add_up(ada):
    held = {f"tool_{n}": 1 for n in range(activity.TOOLS_CAP - 1)}
    TrackedUser.objects.filter(sub=ada.sub).update(mcp_tool_counts=held)
    tool_calls = ["tool_0", "new_a", "new_b", "new_a", "new_c", "tool_0"]  # three new tools, one known
    activity.mcp_tool_calls_record([activity.McpToolCall(sub=ada.sub, tool=tool) for tool in tool_calls])
    counts = TrackedUser.objects.get(sub=ada.sub).mcp_tool_counts
    assert len(counts) == activity.TOOLS_CAP
    assert (counts["tool_0"], counts["new_a"]) == (3, 2)  # the first new tool called is the one kept
    assert "new_b" not in counts and "new_c" not in counts

    activity.mcp_tool_calls_record([
        activity.McpToolCall(sub=ada.sub, tool=tool) for tool in ["new_b", "new_a", "tool_5", "tool_0"]
    ])  # fmt: skip
    counts = TrackedUser.objects.get(sub=ada.sub).mcp_tool_counts
    assert len(counts) == activity.TOOLS_CAP and "new_b" not in counts  # full: no new tool at all
    assert (counts["tool_0"], counts["new_a"], counts["tool_5"], counts["tool_1"]) == (4, 3, 2, 1)


def test_a_batch_gives_the_same_rows_as_its_calls_recorded_one_by_one():
    start = datetime(2026, 11, 3, 9, 0, tzinfo=UTC)

    def calls(prefix):
        """Two users' calls, interleaved; not in time order; some naming a client or giving a context."""
        known, new = f"auth0|{prefix}-known", f"auth0|{prefix}-new"
        minutes = [4, 1, 7, 2, 9, 3, 0, 8, 6, 5] * 8  # more contexts than kept
        return [
            activity.McpToolCall(
                sub=(known, new)[n % 2],
                tool=[" search_docs ", "ask_kapa", "get_page", f"tool_{n % 7}"][n % 4],
                client_name={3: "cursor-vscode", 11: "Goose"}.get(n, ""),
                user_agent={5: "claude-code/1.0.3", 16: "Windsurf/1.2"}.get(n, ""),
                context=f"reason {n}\x00" if n % 3 else "",
                at=start + timedelta(minutes=minutes[n]),
            )
            for n in range(len(minutes))
        ]

    for prefix in ("batch", "single"):  # the known users hold earlier calls
        activity.tracked_user_sign_in(sub=f"auth0|{prefix}-known", channel="docs-login", at=start - timedelta(days=1))
        activity.mcp_tool_call_record(sub=f"auth0|{prefix}-known", tool="ask_kapa", context="earlier", at=start)
    activity.mcp_tool_calls_record(calls("batch"))
    for call in calls("single"):
        activity.mcp_tool_call_record(
            sub=call.sub, tool=call.tool, user_agent=call.user_agent, client_name=call.client_name,
            context=call.context, at=call.at,
        )  # fmt: skip

    columns = ["mcp_tool_counts", "mcp_agent_intents", "mcp_client", "mcp_last_tool_at", "last_activity_at"]
    for user in ("known", "new"):
        batched = TrackedUser.objects.values(*columns).get(sub=f"auth0|batch-{user}")
        single = TrackedUser.objects.values(*columns).get(sub=f"auth0|single-{user}")
        assert batched == single
    assert len(batched["mcp_agent_intents"]) == activity.AGENT_INTENTS_CAP and batched["mcp_client"] == "Goose"


def test_a_batch_of_a_new_and_a_known_user_records_both_and_creates_the_new_one_once(ada):
    earlier, later = datetime(2026, 11, 4, 9, 0, tzinfo=UTC), datetime(2026, 11, 4, 9, 30, tzinfo=UTC)
    subs = activity.mcp_tool_calls_record([
        activity.McpToolCall(sub=ada.sub, tool="search_docs", at=earlier),
        activity.McpToolCall(sub="auth0|newcomer", tool="search_docs", at=earlier + timedelta(minutes=10)),
        activity.McpToolCall(sub="auth0|newcomer", tool="ask_kapa", at=later),
        activity.McpToolCall(sub="auth0|newcomer", tool="search_docs", at=earlier + timedelta(minutes=20)),
    ])  # fmt: skip
    assert subs == {ada.sub, "auth0|newcomer"}
    assert TrackedUser.objects.filter(sub="auth0|newcomer").count() == 1
    new = TrackedUser.objects.get(sub="auth0|newcomer")
    assert (new.signed_up_at, new.last_activity_at, new.mcp_last_tool_at) == (
        earlier + timedelta(minutes=10),
        later,
        later,
    )
    assert (new.last_channel, new.mcp_tool_counts, new.is_pending) == ("mcp", {"search_docs": 2, "ask_kapa": 1}, True)
    # Columns a tool call does not write get the model's defaults.
    assert (new.email, new.mcp_client, new.docs_recent_pages, new.kapa_asked_thread_count) == ("", "", [], 0)
    known = TrackedUser.objects.get(sub=ada.sub)
    assert (known.mcp_tool_counts, known.last_channel, known.signed_up_at) == (
        {"search_docs": 1},
        "docs-login",
        ada.signed_up_at,
    )


@pytest.mark.django_db(transaction=True)
def test_a_user_created_by_another_transaction_while_the_batch_runs_is_counted_exactly_once():
    """The batch's insert meets the other transaction's uncommitted row, waits for its commit, then records the
    call as an update of that row."""
    sub, created, release, recorded, errors = "auth0|racer", threading.Event(), threading.Event(), [], []

    def sign_in_held_open():
        try:
            with transaction.atomic():
                activity.tracked_user_sign_in(sub=sub, channel="docs-login", email="racer@acme.com")
                created.set()
                release.wait(30)
        except Exception as exc:  # collected for the assertion below
            errors.append(exc)
        finally:
            created.set()
            connection.close()

    def record_batch():
        try:
            recorded.append(activity.mcp_tool_calls_record([activity.McpToolCall(sub=sub, tool="search_docs")]))
        except Exception as exc:  # collected for the assertion below
            errors.append(exc)
        finally:
            connection.close()

    holder, batch = threading.Thread(target=sign_in_held_open), threading.Thread(target=record_batch)
    holder.start()
    try:
        assert created.wait(30)
        batch.start()
        waited = _wait_for_a_statement_blocked_on_a_lock("jsonb_to_recordset")
    finally:
        release.set()
        holder.join(30)
        if batch.ident:
            batch.join(30)
    assert waited, "the batch's statement never waited for the other transaction"
    assert errors == [] and recorded == [{sub}]
    user = TrackedUser.objects.get(sub=sub)
    assert (user.mcp_tool_counts, user.email, user.is_pending) == ({"search_docs": 1}, "racer@acme.com", True)


def _wait_for_a_statement_blocked_on_a_lock(text: str, timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND wait_event_type = 'Lock'"
                " AND query LIKE %s",
                [f"%{text}%"],
            )
            if cursor.fetchone()[0]:
                return True
        time.sleep(0.02)
    return False


def test_an_mcp_sign_in_records_identity_and_channel(client, ada):
    body = {"type": "sign_in", "sub": ada.sub, "userAgent": "claude-code/1.0", "orgName": "Acme Corp"}
    assert mcp_event(client, body).status_code == 204
    user = TrackedUser.objects.get(sub=ada.sub)
    assert (user.last_channel, user.mcp_client, user.company, user.email) == (
        "mcp",
        "Claude Code",
        "Acme Corp",
        ada.email,
    )


@pytest.mark.parametrize("key", [None, "", "wrong-key", SERVICE_KEY + "x"])
def test_the_mcp_events_endpoint_refuses_a_wrong_key_and_records_nothing(client, key):
    response = mcp_event(client, {"sub": "auth0|eve", "tool": "search_docs"}, key=key)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "invalid_credentials"
    assert not TrackedUser.objects.filter(sub="auth0|eve").exists()


def test_the_mcp_events_endpoint_is_closed_while_no_key_is_configured(client, settings):
    settings.TRACKING_MCP_SERVICE_KEY = ""
    assert mcp_event(client, {"sub": "auth0|eve", "tool": "t"}, key="").status_code == 401


def test_mcp_events_validate_each_field(client):
    response = mcp_event(client, {"sub": 42, "tool": "", "timestamp": "yesterday", "type": "nap"})
    assert response.status_code == 400
    assert set(response.json()["error"]["fields"]) == {"sub", "tool", "timestamp", "type"}
    assert mcp_event(client, {"sub": "auth0|eve"}).json()["error"]["fields"] == {
        "tool": ["A tool call names its tool."]
    }
    assert not TrackedUser.objects.exists()


def test_a_clock_ahead_does_not_push_activity_into_the_future(client):
    future = timezone.now() + timedelta(days=3)
    mcp_event(client, {"sub": "auth0|eve", "tool": "t", "timestamp": future.isoformat()})
    assert TrackedUser.objects.get(sub="auth0|eve").last_activity_at <= timezone.now()


def test_mark_pending_backfills_by_activity_date(ada):
    from io import StringIO

    from django.core.management import call_command

    TrackedUser.objects.update(pending_since=None, last_activity_at=datetime(2026, 10, 1, tzinfo=UTC))
    activity.tracked_user_sign_in(sub="auth0|new", channel="mcp", at=datetime(2026, 11, 20, tzinfo=UTC))
    TrackedUser.objects.update(pending_since=None)
    out = StringIO()
    call_command("mark_pending", "--active-since", "2026-11-01", "--dry-run", stdout=out)
    assert "would mark 1 users" in out.getvalue() and not TrackedUser.objects.filter(pending_since__isnull=False)
    call_command("mark_pending", "--active-since", "2026-11-01", stdout=out)
    assert list(TrackedUser.objects.filter(pending_since__isnull=False).values_list("sub", flat=True)) == ["auth0|new"]
