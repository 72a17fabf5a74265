"""What /metrics reads when scraped: the state every process shares, read once per scrape from the database
and the cache rather than counted by each process (config/metrics.py has the per-process counters and the
view). Wiring, like config/health.py: it reads the job layer, email lead tracking and the docs users through
their public reads, one query or cache round trip per family.
"""

import math

from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily

import jobs
from config.metrics import metrics_view
from docs_users import selectors as docs_users_selectors
from tracking import selectors as tracking_selectors

JOB_STATUSES = ("pending", "running", "dead")
BREAKER_STATES = ("closed", "open", "half-open")


def job_families():
    """Every registered kind, with zeros when it has no such jobs, so its series stay put."""
    now = timezone.now()
    rows = {row["kind"]: row for row in jobs.queue_by_kind(now=now)}
    counts = GaugeMetricFamily("leadgen_jobs", "Jobs pending, running and dead, by kind.", labels=["kind", "status"])
    oldest = GaugeMetricFamily(
        "leadgen_jobs_oldest_due_age_seconds",
        "How long the oldest due pending job of the kind has waited past its run_after (0: none due).",
        labels=["kind"],
    )
    for kind in sorted({*jobs.registered_kinds(), *rows}):
        row = rows.get(kind, {})
        for status in JOB_STATUSES:
            counts.add_metric([kind, status], row.get(status, 0))
        due_at = row.get("oldest_due_at")
        oldest.add_metric([kind], (now - due_at).total_seconds() if due_at else 0)
    return [counts, oldest]


def breaker_families():
    state = GaugeMetricFamily(
        "leadgen_circuit_breaker_state", "1 for the state each circuit breaker is in, 0 for the others.",
        labels=["breaker", "state"],
    )  # fmt: skip
    for name, breaker in tracking_selectors.circuit_breakers().items():
        for value in BREAKER_STATES:
            state.add_metric([name, value], int(breaker["state"] == value))
    return [state]


def mailbox_families():
    now = timezone.now()
    age = GaugeMetricFamily(
        "leadgen_mailbox_last_successful_poll_age_seconds",
        "Seconds since each active mailbox's last successful poll (+Inf: none within job retention).",
        labels=["mailbox"],
    )
    for name, at in tracking_selectors.mailbox_last_successful_polls().items():
        age.add_metric([name], (now - at).total_seconds() if at else math.inf)
    return [age]


def crm_sync_families():
    at = docs_users_selectors.crm_sync_last_succeeded_at()
    return [
        GaugeMetricFamily(
            "leadgen_crm_sync_last_success_timestamp_seconds",
            "When a CRM sync job last succeeded, in Unix time (0: none within job retention).",
            value=at.timestamp() if at else 0,
        )
    ]


metrics = metrics_view(
    {"jobs": job_families, "breakers": breaker_families, "mailboxes": mailbox_families, "crm_sync": crm_sync_families}
)
