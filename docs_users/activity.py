"""Writes of first-party capture: sign-ins, MCP tool calls, docs page views.

Every capture updates the user's row under a row lock (the counters and capped
lists are read, changed and written back), stamps `last_activity_at` (the
retention clock) and marks the user pending for the daily sync. The caps keep
a hostile or looping client from growing a row without bound, and text is kept
without the characters PostgreSQL cannot store (foundation.db.storable_text): the
MCP server's tool arguments and an identity provider's claims reach here
without passing the API's parser, and one such character would lose the write.
"""

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from disposable_email_domains import blocklist as disposable_domains
from django.db import transaction
from django.utils import timezone

from crm import services as crm_services
from crm.redaction import redact
from docs_users.models import TrackedUser
from foundation.db import fetch_models, storable_text, update_many
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
    return mcp_tool_calls_record([call])[sub]


def mcp_tool_calls_record(calls: Sequence[McpToolCall]) -> dict[str, TrackedUser]:
    """Count MCP tool calls of any number of users in one transaction: the users by sub.

    Every MCP tool call comes here (the MCP server's hot path, which records
    the calls of all its sessions in batches): the rows are read and locked in
    one statement without the ORM's query building, in `sub` order (no
    deadlock between two batches), and only the columns a call changes are
    written, all rows in one pipelined round trip.
    """
    now = timezone.now()
    subs = sorted({call.sub for call in calls})
    with transaction.atomic():
        placeholders = ", ".join(["%s"] * len(subs))
        sql = f"SELECT {{columns}} FROM {_TABLE} WHERE sub IN ({placeholders}) ORDER BY sub FOR UPDATE"
        users = {user.sub: user for user in fetch_models(TrackedUser, sql, subs)}
        for sub in subs:
            if sub not in users:  # first contact through a tool call
                first = min((call.at or now) for call in calls if call.sub == sub)
                defaults = {"last_activity_at": first, "signed_up_at": first, "last_channel": TrackedUser.Channel.MCP}
                users[sub], _ = TrackedUser.objects.select_for_update().get_or_create(sub=sub, defaults=defaults)
        for call in calls:
            _apply_tool_call(users[call.sub], call, call.at or now)
        update_many([users[sub] for sub in subs], _TOOL_CALL_FIELDS)
    return users


def _apply_tool_call(user: TrackedUser, call: McpToolCall, at: datetime) -> None:
    tool = call.tool.strip()[:NAME_CAP]
    if tool in user.mcp_tool_counts or len(user.mcp_tool_counts) < TOOLS_CAP:
        user.mcp_tool_counts[tool] = user.mcp_tool_counts.get(tool, 0) + 1
    user.mcp_last_tool_at = max(filter(None, [user.mcp_last_tool_at, at]))
    if call.client_name or call.user_agent:
        user.mcp_client = mcp_client_name(client_name=call.client_name, user_agent=call.user_agent)
    if context := storable_text(call.context).strip():
        intent = {"tool": tool, "context": context[:TEXT_CAP], "at": at.isoformat()}
        user.mcp_agent_intents = [intent, *user.mcp_agent_intents][:AGENT_INTENTS_CAP]
    _touch(user, at)


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


_TABLE = TrackedUser._meta.db_table
_TOOL_CALL_FIELDS = [
    "mcp_tool_counts", "mcp_last_tool_at", "mcp_client", "mcp_agent_intents", "last_activity_at", "pending_since",
    "updated_at",
]  # fmt: skip


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
