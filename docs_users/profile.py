"""The profile delivered to the CRM: a tracked user, grouped by source, free text redacted.

The contract is `docs_users/schemas/crm-profile.v1.json` (tests validate every
payload against it). Groups name their source so the CRM side can tell where a
value came from: `identity`, then `mcp*`, `kapa*` and `docs*` fields.

What is redacted here: the agents' intents (`mcpAgentIntents[].context`) and
docs search queries are our own capture of free text, so `crm.redaction.redact`
masks them first. Kapa questions are masked by Kapa at source (a project
setting) and go as they are. Kapa competitor mentions are kept in our store
(admin shows them) but are not part of the delivered contract yet.
"""

from datetime import datetime

from crm.redaction import redact
from docs_users.models import TrackedUser

SCHEMA_VERSION = 1
TOP_PAGES = 5


def crm_profile(user: TrackedUser) -> dict:
    """The JSON-ready profile of one user (datetimes as ISO 8601 strings)."""
    return {
        "schemaVersion": SCHEMA_VERSION,
        "sub": user.sub,
        "identity": {
            "email": user.email or None,
            "givenName": user.given_name or None,
            "familyName": user.family_name or None,
            "company": user.company or None,
            "signedUpAt": _iso(user.signed_up_at),
            "lastSignInAt": _iso(user.last_sign_in_at),
            "lastChannel": user.last_channel or None,
            "lastActivityAt": _iso(user.last_activity_at),
        },
        "mcp": {
            "mcpClient": user.mcp_client or None,
            "mcpTools": dict(user.mcp_tool_counts),
            "mcpToolsInvoked": sorted(user.mcp_tool_counts),
            "mcpToolCalls": sum(user.mcp_tool_counts.values()),
            "mcpLastToolAt": _iso(user.mcp_last_tool_at),
            "mcpAgentIntents": [
                {"tool": intent["tool"], "context": redact(intent["context"]), "at": intent["at"]}
                for intent in user.mcp_agent_intents
            ],
        },
        "kapa": {
            "kapaConversations": user.kapa_thread_count,
            "kapaLastInteractionAt": _iso(user.kapa_last_interaction_at),
            "kapaQuestions": list(user.kapa_questions),
        },
        "docs": {
            "docsRecentPages": list(dict.fromkeys(page_path(path) for path in user.docs_recent_pages)),
            "docsTopPages": _top(user.docs_page_counts, TOP_PAGES),
            "docsPageViews": sum(user.docs_page_counts.values()),
            "docsProductAreas": dict(user.docs_product_areas),
            "docsGettingStartedVisits": user.docs_getting_started_visits,
            "docsSearchQueries": [redact(term) for term in user.docs_search_terms],
            "docsLastActiveAt": _iso(user.docs_last_active_at),
        },
    }


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment else None


def page_path(path: str) -> str:
    """A docs page as delivered: no query string or fragment (they can carry emails and tokens), and
    anything personal left in the path itself redacted."""
    return redact(path.split("#", 1)[0].split("?", 1)[0])


def _top(counts: dict, n: int) -> list[dict]:
    merged: dict[str, int] = {}
    for path, views in counts.items():
        merged[page_path(path)] = merged.get(page_path(path), 0) + views
    ranked = sorted(merged.items(), key=lambda item: (-item[1], item[0]))[:n]
    return [{"path": path, "views": views} for path, views in ranked]
