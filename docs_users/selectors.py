"""Reads of the signed-in docs and MCP users: the MCP clients seen, the back office's and the metrics'
figures, and data-subject requests."""

from datetime import datetime

from django.db.models import Count, Max
from django.db.models.functions import TruncDate

import jobs
from docs_users.models import TrackedUser
from docs_users.sync import SYNC_KIND


def mcp_clients_seen():
    """Each MCP client seen, with how many users it has and when one of them last called a tool; most users first."""
    return (
        TrackedUser.objects.exclude(mcp_client="")
        .values("mcp_client")
        .annotate(users=Count("id"), last_tool_at=Max("mcp_last_tool_at"), last_activity_at=Max("last_activity_at"))
        .order_by("-users", "mcp_client")
    )


def tracked_users_per_day_counts(*, start, end) -> list[dict]:
    """Docs and MCP users first seen in [start, end), per day (site time zone): {day, count}."""
    users = TrackedUser.objects.filter(created_at__gte=start, created_at__lt=end).annotate(day=TruncDate("created_at"))
    return list(users.values("day").annotate(count=Count("pk")).order_by())


def crm_sync_last_succeeded_at() -> datetime | None:
    """When a job of the CRM sync (daily or triggered) last succeeded (None: none within job retention)."""
    succeeded = jobs.jobs_with_key_prefix(f"{SYNC_KIND}:").filter(status="succeeded")
    return succeeded.aggregate(at=Max("finished_at"))["at"]


# --- data-subject requests (privacy/) ------------------------------------------------------------


def subject_rows(*, emails) -> dict[str, list[dict]]:
    """The signed-in docs and MCP users with one of the emails (any case), whole: everything captured about
    each lives on its row. {model label: rows}."""
    users = TrackedUser.objects.none()
    for email in emails:
        users |= TrackedUser.objects.filter(email__iexact=email)
    return {TrackedUser._meta.label: list(users.order_by("pk").values())}
