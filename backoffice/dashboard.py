"""The dashboard's figures, put together from each app's selectors and the job layer.

This module sits above the domain apps (it reads leadgen, crm, tracking, docs_users, prototypes and chat)
and computes nothing itself beyond arranging their counts. Every figure takes
the stores it covers (`store_ids`, None for every store); the caller applies
store-level isolation once (stores.scoping). Days are calendar days in the
site's time zone (TIME_ZONE). docs/backoffice.md says what each figure means.
"""

from dataclasses import dataclass
from datetime import date, datetime, timedelta

from django.conf import settings
from django.core.cache import cache
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

import jobs
from chat import selectors as chat_selectors
from crm import selectors as crm_selectors
from docs_users import selectors as docs_users_selectors
from foundation.schedules import PERIODIC_TASKS
from leadgen import selectors as lead_selectors
from prototypes import selectors as prototype_selectors
from tracking import selectors as tracking_selectors


@dataclass(frozen=True)
class Period:
    """Whole days, `first` to `last` inclusive, in the site's time zone; `start`/`end` bound them in time."""

    first: date
    last: date

    @classmethod
    def last_days(cls, days: int, *, today: date | None = None) -> "Period":
        today = today or timezone.localdate()
        return cls(first=today - timedelta(days=days - 1), last=today)

    @property
    def start(self) -> datetime:
        return timezone.make_aware(datetime.combine(self.first, datetime.min.time()))

    @property
    def end(self) -> datetime:
        return timezone.make_aware(datetime.combine(self.last + timedelta(days=1), datetime.min.time()))

    @property
    def days(self) -> list[date]:
        return [self.first + timedelta(days=n) for n in range((self.last - self.first).days + 1)]


# --- leads per day -------------------------------------------------------------------------------

MCP_DOCS_CHANNEL = "mcp_docs"
CHANNEL_LABELS = {
    "web_form": "Web form", "email": "Email", "facebook": "Facebook Lead Ads", "google_ads": "Google Ads",
    "typeform": "Typeform", "webflow": "Webflow", "webhook": "Webhook", MCP_DOCS_CHANNEL: "MCP / docs users",
}  # fmt: skip
# Channels of inbound lead sources (sources/): charted only in a period they sent leads in.
SOURCE_CHANNELS = ("facebook", "google_ads", "typeform", "webflow", "webhook")
STATUS_LABELS = {"lead": "Lead", "spam": "Spam", "vendor": "Vendor"}


@dataclass(frozen=True)
class DailySeries:
    days: list[date]
    by_channel: dict[str, list[int]]  # channel → count per day, in `days` order
    by_status: dict[str, list[int]]


def lead_counts(*, period: Period, store_ids=None) -> list[dict]:
    """The period's leads grouped by day, channel and status: what the daily charts and the funnel add up."""
    return lead_selectors.leads_per_day_counts(start=period.start, end=period.end, store_ids=store_ids)


def leads_per_day(*, period: Period, store_ids=None, rows: list[dict] | None = None) -> DailySeries:
    """Leads recorded per day, by channel and by classification; first-seen MCP and docs users as a channel.

    Tracked users belong to no store, so they count only when every store is shown. `rows`: lead_counts()
    of the same period and stores, when the caller has them already.
    """
    index = {day: n for n, day in enumerate(period.days)}
    by_channel = {channel: [0] * len(index) for channel in CHANNEL_LABELS}
    by_status = {status: [0] * len(index) for status in STATUS_LABELS}
    if rows is None:
        rows = lead_counts(period=period, store_ids=store_ids)
    for row in rows:
        by_channel[row["channel"]][index[row["day"]]] += row["count"]
        by_status[row["status"]][index[row["day"]]] += row["count"]
    if store_ids is None:
        for row in docs_users_selectors.tracked_users_per_day_counts(start=period.start, end=period.end):
            by_channel[MCP_DOCS_CHANNEL][index[row["day"]]] += row["count"]
    else:
        del by_channel[MCP_DOCS_CHANNEL]
    for channel in SOURCE_CHANNELS:
        if not any(by_channel[channel]):
            del by_channel[channel]
    return DailySeries(days=period.days, by_channel=by_channel, by_status=by_status)


# --- funnel --------------------------------------------------------------------------------------

FUNNEL_LABELS = {
    "received": "Received", "qualified": "Qualified lead", "delivered": "Delivered to Pipedrive",
    "prototype_completed": "Prototype completed", "contacted": "Contacted (task done)",
}  # fmt: skip


@dataclass(frozen=True)
class FunnelStep:
    key: str
    label: str
    count: int
    conversion: float | None  # share of the step before; None for the first step or after an empty one
    # Share of the received leads: the steps are not nested (prototypes come from the web form, outreach
    # tasks from emails), so this reads even after an empty step. None for the first step or no leads.
    of_received: float | None


@dataclass(frozen=True)
class Prototypes:
    """Prototypes requested in the period (created with their lead), by where they stand now."""

    requested: int
    completed: int
    failed: int
    in_progress: int

    @property
    def share_completed(self) -> float | None:
        """Completed among those that ended (completed or failed); None while none has ended."""
        ended = self.completed + self.failed
        return self.completed / ended if ended else None


def prototypes(*, period: Period, store_ids=None) -> Prototypes:
    counts = prototype_selectors.prototypes_requested_counts(
        start=period.start, end=period.end, store_ids=store_ids
    )
    return Prototypes(**counts)


def funnel(
    *, period: Period, store_ids=None, rows: list[dict] | None = None, prototype_counts: Prototypes | None = None
) -> list[FunnelStep]:
    """Leads recorded in the period, and how many of them reached each later step (each counted on its own).

    `rows` and `prototype_counts`: lead_counts() and prototypes() of the same period and stores, when the
    caller has them already.
    """
    if rows is None:
        rows = lead_counts(period=period, store_ids=store_ids)
    if prototype_counts is None:
        prototype_counts = prototypes(period=period, store_ids=store_ids)
    bounds = {"start": period.start, "end": period.end, "store_ids": store_ids}
    counts = {
        "received": sum(row["count"] for row in rows),
        "qualified": sum(row["count"] for row in rows if row["status"] == "lead"),
        "delivered": sum(row["delivered"] for row in rows),
        "prototype_completed": prototype_counts.completed,
        "contacted": crm_selectors.leads_contacted_count(**bounds),
    }
    steps, previous, received = [], None, counts["received"]
    for key, label in FUNNEL_LABELS.items():
        conversion = counts[key] / previous if previous else None
        of_received = counts[key] / received if received and previous is not None else None
        steps.append(
            FunnelStep(key=key, label=label, count=counts[key], conversion=conversion, of_received=of_received)
        )
        previous = counts[key]
    return steps


# --- chats ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Chats:
    chats: int  # sales chats first seen in the period
    with_lead: int  # of those, the ones that produced a lead

    @property
    def share_with_lead(self) -> float | None:
        return self.with_lead / self.chats if self.chats else None


def chats(*, period: Period, store_ids=None) -> Chats:
    """Sales chats started in the period; a store's staff count those whose lead is of their stores."""
    return Chats(**chat_selectors.chat_sessions_started_counts(start=period.start, end=period.end, store_ids=store_ids))


def first_response(*, period: Period, store_ids=None, now=None) -> crm_selectors.FirstResponse:
    return crm_selectors.first_response(start=period.start, end=period.end, store_ids=store_ids, now=now)


def first_response_by_rep(*, period: Period, store_ids=None, now=None) -> list[crm_selectors.RepFirstResponse]:
    return crm_selectors.first_response_by_rep(start=period.start, end=period.end, store_ids=store_ids, now=now)


# --- delivery health -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Beat:
    name: str
    last_run_at: datetime | None
    enabled: bool
    periodic_task_id: int | None


@dataclass(frozen=True)
class DeliveryHealth:
    jobs_by_kind: list[dict]
    breakers: dict[str, dict]
    mailbox_polls: list[dict]
    beats: list[Beat]


def delivery_health(*, store_ids=None) -> DeliveryHealth:
    """Jobs not yet done or dead per kind (of `store_ids`; None: every job), breaker states, the last poll
    per mailbox and run per beat task."""
    rows = {task.name: task for task in PeriodicTask.objects.filter(name__in=list(PERIODIC_TASKS))}
    beats = [
        Beat(
            name=name,
            last_run_at=rows[name].last_run_at if name in rows else None,
            enabled=rows[name].enabled if name in rows else False,
            periodic_task_id=rows[name].pk if name in rows else None,
        )
        for name in PERIODIC_TASKS
    ]
    return DeliveryHealth(
        jobs_by_kind=jobs.health_by_kind(store_ids=store_ids),
        breakers=tracking_selectors.circuit_breakers(),
        mailbox_polls=tracking_selectors.mailbox_last_polls(),
        beats=beats,
    )


# --- all figures, cached briefly ------------------------------------------------------------------

SECTIONS = ("leads", "prototypes", "chats", "first_response", "reps", "delivery_health")


def figures(*, period: Period, store_ids, sections) -> dict:
    """The figures of `sections` for the period and stores, computed at most once per DASHBOARD_CACHE_SECONDS.

    Every staff user opening the index asks for the same few combinations, and each costs a few range
    scans of the lead, task and job tables: computing them once a minute is what keeps the page fast on
    large tables (bench/backoffice). `computed_at` says how old they are.
    """
    seconds = settings.DASHBOARD_CACHE_SECONDS
    stores = "all" if store_ids is None else ",".join(str(pk) for pk in sorted(store_ids))
    key = f"backoffice:dashboard:{period.first}:{period.last}:{stores}:{','.join(sorted(sections))}"
    cached = cache.get(key) if seconds > 0 else None
    if cached is not None:
        return cached
    result = {"computed_at": timezone.now()}
    if "leads" in sections or "prototypes" in sections:
        prototype_counts = prototypes(period=period, store_ids=store_ids)
        if "prototypes" in sections:
            result["prototypes"] = prototype_counts
    if "leads" in sections:
        rows = lead_counts(period=period, store_ids=store_ids)
        result["daily"] = leads_per_day(period=period, store_ids=store_ids, rows=rows)
        result["funnel"] = funnel(period=period, store_ids=store_ids, rows=rows, prototype_counts=prototype_counts)
    if "chats" in sections:
        result["chats"] = chats(period=period, store_ids=store_ids)
    if "first_response" in sections:
        result["first_response"] = first_response(period=period, store_ids=store_ids)
    if "reps" in sections:
        result["reps"] = first_response_by_rep(period=period, store_ids=store_ids)
    if "delivery_health" in sections:
        result["delivery_health"] = delivery_health(store_ids=store_ids)
    if seconds > 0:
        cache.set(key, result, seconds)
    return result
