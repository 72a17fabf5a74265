"""Writes of first-party capture: sign-ins, MCP tool calls, docs page views.

Every capture updates the user's row under a row lock (the counters and capped
lists are read, changed and written back), stamps `last_activity_at` (the
retention clock) and marks the user pending for the daily sync. The caps keep
a hostile or looping client from growing a row without bound, and text is kept
without the characters PostgreSQL cannot store (foundation.db.storable_text): the
MCP server's tool arguments and an identity provider's claims reach here
without passing the API's parser, and one such character would lose the write.
"""

import functools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from disposable_email_domains import blocklist as disposable_domains
from django.db import connection, transaction
from django.utils import timezone

from crm import services as crm_services
from crm.redaction import redact
from docs_users.models import TrackedUser
from foundation.batching import ITEM_ERRORS
from foundation.db import storable_text
from integrations.kapa.client import MAX_QUESTIONS

RECENT_PAGES_CAP = 10
PAGE_COUNTS_CAP = 100
PRODUCT_AREAS_CAP = 50
SEARCH_TERMS_CAP = 20
AGENT_INTENTS_CAP = 20
TOOLS_CAP = 100
TEXT_CAP = 500  # characters of one search term or agent context
NAME_CAP = 100  # characters of a tool name, product area, MCP client or Kapa thread id
# The sync keeps at most MAX_QUESTIONS questions in a profile: more asked ones could never be shown.
KAPA_ASKED_QUESTIONS_CAP = MAX_QUESTIONS

# A `get-started` path segment, landing page or below, in any product; not "forget-started".
GETTING_STARTED = re.compile(r"(?:^|/)get-started(?:[/.#?]|$)")

# Mailbox providers: an address there says nothing about the employer.
FREE_MAIL_DOMAINS = frozenset({
    "gmail.com", "googlemail.com", "outlook.com", "hotmail.com", "live.com", "msn.com", "yahoo.com", "ymail.com",
    "icloud.com", "me.com", "mac.com", "aol.com", "proton.me", "protonmail.com", "pm.me", "gmx.com", "gmx.de",
    "gmx.net", "web.de", "mail.com", "yandex.com", "yandex.ru", "mail.ru", "qq.com", "163.com", "126.com",
    "zoho.com", "fastmail.com", "hey.com", "tutanota.com", "duck.com",
})  # fmt: skip
# Second-level labels under a country code: the company is the label before them (acme.co.uk).
_COUNTRY_SECOND_LEVELS = frozenset({"co", "com", "org", "net", "ac", "gov", "edu", "ltd", "plc"})

# Known MCP clients by the product token their User-Agent starts with (lowercase).
_MCP_CLIENTS = {
    "claude-code": "Claude Code",
    "claude-ai": "Claude",
    "claude-user": "Claude",
    "claude": "Claude",
    "cursor": "Cursor",
    "windsurf": "Windsurf",
    "vscode": "VS Code",
    "code": "VS Code",
    "visual-studio-code": "VS Code",
    "zed": "Zed",
    "cline": "Cline",
    "goose": "Goose",
    "openai-mcp": "ChatGPT",
    "chatgpt": "ChatGPT",
    "gemini-cli": "Gemini CLI",
    "codex": "Codex",
}
_PRODUCT_TOKEN = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._ -]*?)(?:/[^\s]*|\s|$)")


def company_from_email(email: str) -> str:
    """ "Acme" for jane@acme.com or jane@eu.acme.co.uk; "" for free-mail and disposable domains."""
    domain = email.rpartition("@")[2].strip().lower().rstrip(".")
    if not domain or domain in FREE_MAIL_DOMAINS or domain in disposable_domains:
        return ""
    labels = domain.split(".")
    if len(labels) >= 3 and len(labels[-1]) == 2 and labels[-2] in _COUNTRY_SECOND_LEVELS:
        name = labels[-3]
    elif len(labels) >= 2:
        name = labels[-2]
    else:
        return ""
    return " ".join(word.capitalize() for word in name.split("-") if word)


def mcp_client_from_user_agent(user_agent: str) -> str:
    """The client named by a User-Agent's first product token: "claude-code/1.0.3 (cli)" → "Claude Code"."""
    match = _PRODUCT_TOKEN.match(user_agent or "")
    if not match:
        return ""
    token = match.group(1).strip()
    return _MCP_CLIENTS.get(token.lower(), token)[:NAME_CAP]


@functools.lru_cache(maxsize=1024)  # every tool call of a session names the same client
def mcp_client_name(*, client_name: str = "", user_agent: str = "") -> str:
    """The MCP client by the name it gave in its initialize request ("claude-ai", "cursor-vscode"), else its
    User-Agent."""
    name = " ".join(storable_text(client_name).split())
    if not name:
        return mcp_client_from_user_agent(user_agent)
    first_word = re.split(r"[\s_-]", name.lower(), maxsplit=1)[0]
    return _MCP_CLIENTS.get(name.lower(), _MCP_CLIENTS.get(first_word, name))[:NAME_CAP]


def tracked_user_sign_in(
    *,
    sub: str,
    channel: str,
    email: str = "",
    given_name: str = "",
    family_name: str = "",
    org_name: str = "",
    user_agent: str = "",
    client_name: str = "",
    at: datetime | None = None,
) -> TrackedUser:
    """Record a sign-in through the docs login or the MCP server, creating the user on first sight.

    Empty claims keep what is stored (an MCP token may carry fewer claims than
    the docs login); the channel of this sign-in becomes `last_channel`. A docs
    sign-in that gives an email (the docs login passes only a verified one) joins
    the shared pool's contact of that email, the sign-in on its timeline.
    """
    at = at or timezone.now()
    given_name, family_name, org_name = map(storable_text, (given_name, family_name, org_name))
    with transaction.atomic():
        user, _ = TrackedUser.objects.select_for_update().get_or_create(
            sub=sub, defaults={"last_activity_at": at, "signed_up_at": at}
        )
        # Claims are capped to the columns; an address too long to be valid, or holding characters PostgreSQL
        # cannot store (no address has them), is not stored at all.
        valid_email = len(email) <= _max_length("email") and storable_text(email) == email
        user.email = (email if valid_email else "") or user.email
        user.given_name = given_name[: _max_length("given_name")] or user.given_name
        user.family_name = family_name[: _max_length("family_name")] or user.family_name
        user.company = (org_name or user.company or company_from_email(user.email))[: _max_length("company")]
        user.last_sign_in_at = at
        user.last_channel = channel
        if channel == TrackedUser.Channel.MCP and (client_name or user_agent):
            user.mcp_client = mcp_client_name(client_name=client_name, user_agent=user_agent)
        _touch(user, at)
        user.save()
        if channel == TrackedUser.Channel.DOCS_LOGIN and valid_email and email:
            crm_services.docs_sign_in_record(
                tracked_user_id=user.pk, email=email, first_name=user.given_name, last_name=user.family_name,
                company=user.company, at=at,
            )  # fmt: skip
    return user


@dataclass(frozen=True)
class McpToolCall:
    """One MCP tool call of the user `sub`, as the MCP server or its events API saw it."""

    sub: str
    tool: str
    user_agent: str = ""
    client_name: str = ""
    context: str = ""
    at: datetime | None = None


def mcp_tool_call_record(
    *,
    sub: str,
    tool: str,
    user_agent: str = "",
    client_name: str = "",
    context: str = "",
    at: datetime | None = None,
) -> TrackedUser:
    """Count one MCP tool call; the agent's optional context is kept, capped, for delivery (redacted then)."""
    call = McpToolCall(sub=sub, tool=tool, user_agent=user_agent, client_name=client_name, context=context, at=at)
    mcp_tool_calls_record([call])
    return TrackedUser.objects.get(sub=sub)


def mcp_tool_calls_record(calls: Sequence[McpToolCall]) -> set[str]:
    """Count MCP tool calls of any number of users in one statement: the subs recorded (all of the calls').

    Every MCP tool call comes here (the MCP server's hot path, which records
    the calls of all its sessions in batches). The calls are folded per user
    here and applied in SQL (`_record_calls_sql`), as if one by one: the rows are
    locked in `sub` order (no deadlock between two batches), each user's
    tools counted (a new tool only while the row holds fewer than TOOLS_CAP),
    the contexts put in front of the stored ones (capped), and a user seen
    for the first time is created by the same statement. One statement is
    atomic without a transaction around it: one round trip, and no row read
    into Python.
    """
    now = timezone.now()
    by_sub: dict[str, _Folded] = {}
    for call in sorted(calls, key=lambda call: call.sub):  # stable: each user's calls keep their order
        at = call.at or now
        folded = by_sub.get(call.sub)
        if folded is None:
            folded = by_sub[call.sub] = _Folded(first_at=at, last_at=at)
        folded.first_at, folded.last_at = min(folded.first_at, at), max(folded.last_at, at)
        tool = call.tool.strip()[:NAME_CAP]
        folded.tools[tool] = folded.tools.get(tool, 0) + 1
        if call.client_name or call.user_agent:
            folded.client = mcp_client_name(client_name=call.client_name, user_agent=call.user_agent)
        if context := storable_text(call.context).strip():
            folded.intents.insert(0, {"tool": tool, "context": context[:TEXT_CAP], "at": at.isoformat()})
    recorded = _record_folded(by_sub, now)
    if missing := by_sub.keys() - recorded:
        # Created meanwhile by another transaction (this statement's insert met it): counted again, now
        # as an update. The rest is committed, so this failing must not have the batch written again in halves.
        try:
            recorded |= _record_folded({sub: by_sub[sub] for sub in sorted(missing)}, now)
        except ITEM_ERRORS as exc:
            raise RuntimeError("tool calls of users created meanwhile not recorded") from exc
    return recorded


@dataclass
class _Folded:
    """One user's calls of a batch."""

    first_at: datetime
    last_at: datetime
    tools: dict[str, int] = field(default_factory=dict)  # in the order of their first call
    client: str | None = None  # the last call's client, when a call named one
    intents: list[dict] = field(default_factory=list)  # newest first

    def row(self, sub: str) -> dict:
        return {
            "sub": sub, "tools": list(self.tools.items()), "intents": self.intents[:AGENT_INTENTS_CAP],
            "named": self.client is not None, "client": self.client or "",
            "first_at": self.first_at.isoformat(), "last_at": self.last_at.isoformat(),
        }  # fmt: skip


def _record_folded(by_sub: dict[str, "_Folded"], now: datetime) -> set[str]:
    # One JSON document for all users' rows: psycopg's dumping of arrays costs more than the statement.
    rows = json.dumps([folded.row(sub) for sub, folded in by_sub.items()])
    params = {"rows": rows, "now": now, "mcp": TrackedUser.Channel.MCP.value, **_insert_defaults()}
    with connection.cursor() as cursor:
        cursor.execute(_record_calls_sql(), params)
        return {sub for (sub,) in cursor.fetchall()}


_TABLE = TrackedUser._meta.db_table
# Written by a tool call, or by the first one; the other columns of a new row get their defaults.
_TOOL_CALL_COLUMNS = (
    "sub", "signed_up_at", "last_channel", "mcp_client", "last_activity_at", "pending_since", "mcp_tool_counts",
    "mcp_last_tool_at", "mcp_agent_intents", "created_at", "updated_at",
)  # fmt: skip
# {counts}: the stored counts plus the batch's, a tool the row does not hold only within TOOLS_CAP (in the
# order of first calls). {intents}: the batch's contexts (newest first) before the stored ones, capped.
_COUNTS = f"""{{counts}} || COALESCE((
        SELECT jsonb_object_agg(t.tool, COALESCE(({{counts}} ->> t.tool)::bigint, 0) + t.n) FROM (
            SELECT d.e ->> 0 AS tool, (d.e ->> 1)::bigint AS n, {{counts}} ? (d.e ->> 0) AS known,
                   count(*) FILTER (WHERE NOT {{counts}} ? (d.e ->> 0)) OVER (ORDER BY d.i) AS new_rank
            FROM jsonb_array_elements(c.tools) WITH ORDINALITY AS d(e, i)
        ) AS t
        WHERE t.known OR t.new_rank <= {TOOLS_CAP} - (SELECT count(*) FROM jsonb_object_keys({{counts}}))
    ), '{{{{}}}}'::jsonb)"""
_INTENTS = f"""CASE WHEN c.intents = '[]'::jsonb THEN {{intents}} ELSE (
        SELECT jsonb_agg(i.e ORDER BY i.n)
        FROM jsonb_array_elements(c.intents || {{intents}}) WITH ORDINALITY AS i(e, n) WHERE i.n <= {AGENT_INTENTS_CAP}
    ) END"""


@functools.cache
def _record_calls_sql() -> str:
    defaults = list(_insert_defaults())
    return f"""
WITH c AS (
    SELECT * FROM jsonb_to_recordset(%(rows)s::jsonb) AS c(
        sub text, tools jsonb, intents jsonb, named boolean, client text, first_at timestamptz, last_at timestamptz
    )
), locked AS (
    SELECT id, sub FROM {_TABLE} WHERE sub IN (SELECT sub FROM c) ORDER BY sub FOR UPDATE
), updated AS (
    UPDATE {_TABLE} AS u SET
        mcp_tool_counts = {_COUNTS.format(counts="u.mcp_tool_counts")},
        mcp_last_tool_at = GREATEST(u.mcp_last_tool_at, c.last_at),
        mcp_client = CASE WHEN c.named THEN c.client ELSE u.mcp_client END,
        mcp_agent_intents = {_INTENTS.format(intents="u.mcp_agent_intents")},
        last_activity_at = GREATEST(u.last_activity_at, c.last_at),
        pending_since = %(now)s, updated_at = %(now)s
    FROM c JOIN locked ON locked.sub = c.sub WHERE u.id = locked.id
    RETURNING u.sub
), inserted AS (
    INSERT INTO {_TABLE} ({", ".join(_TOOL_CALL_COLUMNS + tuple(defaults))})
    SELECT c.sub, c.first_at, %(mcp)s, CASE WHEN c.named THEN c.client ELSE '' END, c.last_at, %(now)s,
           {_COUNTS.format(counts="'{}'::jsonb")}, c.last_at, {_INTENTS.format(intents="'[]'::jsonb")},
           %(now)s, %(now)s{"".join(f", %({column})s" for column in defaults)}
    FROM c WHERE c.sub NOT IN (SELECT sub FROM locked)
    ON CONFLICT (sub) DO NOTHING
    RETURNING sub
)
SELECT sub FROM updated UNION ALL SELECT sub FROM inserted"""


@functools.cache
def _insert_defaults() -> dict:
    """The columns a tool call does not write, for a new row: the model's defaults, as save() converts them."""
    return {
        f.column: f.get_db_prep_save(f.get_default(), connection)
        for f in TrackedUser._meta.concrete_fields
        if not f.primary_key and f.name not in _TOOL_CALL_COLUMNS
    }


def kapa_question_record(*, sub: str, thread_id: str, question: str, at: datetime | None = None) -> TrackedUser:
    """Record a question the user asked Kapa through the MCP server, in the Kapa thread it started.

    The daily sync merges these into the user's Kapa engagement. Unlike the
    widget's questions (masked by Kapa), this text is our own capture: it is
    stored redacted and capped, and only the newest KAPA_ASKED_QUESTIONS_CAP
    are kept (the thread count keeps counting; a thread among the kept ones
    is not counted again, and each question Kapa's Chat answers starts a new one).
    """
    at = at or timezone.now()
    thread_id = storable_text(thread_id).strip()[:NAME_CAP]
    question = redact(" ".join(storable_text(question).split()))[:TEXT_CAP]
    entry = {"thread_id": thread_id, "question": question, "at": at.isoformat()}
    with transaction.atomic():
        user, _ = TrackedUser.objects.select_for_update().get_or_create(
            sub=sub, defaults={"last_activity_at": at, "signed_up_at": at, "last_channel": TrackedUser.Channel.MCP}
        )
        if all(asked["thread_id"] != thread_id for asked in user.kapa_asked_questions):
            user.kapa_asked_thread_count += 1
        user.kapa_asked_questions = [entry, *user.kapa_asked_questions][:KAPA_ASKED_QUESTIONS_CAP]
        _touch(user, at)
        user.save(update_fields=["kapa_asked_thread_count", "kapa_asked_questions", "last_activity_at",
                                 "pending_since", "updated_at"])  # fmt: skip
    return user


def docs_page_view_record(
    *, sub: str, path: str, component: str = "", search_term: str = "", at: datetime | None = None
) -> TrackedUser | None:
    """Record a docs page view (and the search that led to it, if any); None for an unknown user."""
    at = at or timezone.now()
    path = path.strip()
    with transaction.atomic():
        user = TrackedUser.objects.select_for_update().filter(sub=sub).first()
        if user is None:  # signed in, then deleted by retention: the next sign-in creates them again
            return None
        if path:
            user.docs_recent_pages = [path, *(p for p in user.docs_recent_pages if p != path)][:RECENT_PAGES_CAP]
            user.docs_page_counts = _count(user.docs_page_counts, path, cap=PAGE_COUNTS_CAP)
            area = (component.strip() or _first_segment(path))[:NAME_CAP]
            if area:
                user.docs_product_areas = _count(user.docs_product_areas, area, cap=PRODUCT_AREAS_CAP)
            if GETTING_STARTED.search(path):
                user.docs_getting_started_visits += 1
        term = " ".join(search_term.split())[:TEXT_CAP]
        if term:
            user.docs_search_terms = [term, *(t for t in user.docs_search_terms if t != term)][:SEARCH_TERMS_CAP]
        user.docs_last_active_at = at
        _touch(user, at)
        user.save()
    return user


def tracked_users_mark_pending(*, active_since: datetime) -> int:
    """Mark every user active since then pending, so the next sync delivers them again (backfill)."""
    return TrackedUser.objects.filter(last_activity_at__gte=active_since).update(pending_since=timezone.now())


def _max_length(field: str) -> int:
    return TrackedUser._meta.get_field(field).max_length


def _touch(user: TrackedUser, at: datetime) -> None:
    """Genuine activity: moves the retention clock and marks the user pending."""
    user.last_activity_at = max(user.last_activity_at, at) if user.last_activity_at else at
    # The latest capture's time: the sync clears the marker only if no capture came after it read the row.
    user.pending_since = timezone.now()


def _count(counts: dict, key: str, *, cap: int) -> dict:
    """Counts with `key` incremented; past the cap the least counted entry makes room (the newest stays)."""
    counts = dict(counts)
    counts[key] = counts.get(key, 0) + 1
    while len(counts) > cap:
        least = min((k for k in counts if k != key), key=counts.__getitem__)
        del counts[least]
    return counts


def _first_segment(path: str) -> str:
    return next((segment for segment in path.split("?")[0].split("/") if segment), "")
