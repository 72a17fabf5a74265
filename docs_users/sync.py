"""The daily CRM sync of tracked users, their profile delivery, and retention.

- The beat trigger (and the guarded internal endpoints) only enqueue a sync job
  and a retention job; the work happens in those jobs on the workers.
- A sync job takes the users pending since before it started, a batch at a
  time through the partial index on `pending_since` (so its cost follows the
  day's actives, not every user ever signed up), and hands them to
  TRACKING_SYNC_CONCURRENCY threads. Each thread refreshes the user's Kapa
  engagement, then in one transaction clears the marker and enqueues one
  coalesced profile delivery, and runs that delivery itself. A failed delivery
  is the job layer's to retry; a user whose step failed stays pending.
- Past its time budget the sync stops taking users and queues its own
  continuation; if its worker dies, the job layer reclaims it after the lease
  and it resumes with whoever is still pending.
- Retention deletes users without genuine activity for LEAD_RETENTION_DAYS, a
  batch per job, each full batch queueing the next.
"""

import functools
import operator
import queue
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

import structlog
from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.db.models.functions import Mod
from django.utils import timezone
from django.utils.dateparse import parse_datetime

import jobs
from docs_users.models import TrackedUser
from docs_users.profile import crm_profile
from foundation.db import fetch_models
from integrations.kapa.client import MAX_QUESTIONS
from integrations.kapa.client import client_from_settings as kapa_client_from_settings
from integrations.kapa.competitors import count_mentions
from integrations.profile_webhook.client import client_from_settings as crm_client_from_settings

logger = structlog.get_logger(__name__)

# The kinds keep the names they were first queued under: jobs in the database carry them.
SYNC_KIND = "tracking.sync"
DELIVER_KIND = "tracking.deliver_profile"
RETENTION_KIND = "tracking.retention"
DELIVER_MAX_ATTEMPTS = 8  # about a day of backoff (JOBS_BACKOFF_MAX_SECONDS) before a delivery is dead-lettered
_NEVER = datetime.min.replace(tzinfo=UTC)


@dataclass
class SyncProgress:
    synced: int = 0
    failed: int = 0
    remaining: bool = False


def daily_sync_start(*, reason: str):
    """Queue a sync of everyone pending now and a retention pass (what the beat trigger does)."""
    with transaction.atomic():
        return profile_sync_start(reason=reason), retention_start()


def profile_sync_start(*, reason: str):
    """Queue a sync of the users pending now, one job per shard; triggers within the same minute share them.

    Shards split the pending users by id and run side by side on separate
    worker processes, each with its share of the calls in flight: in one
    process alone the sync waits for its own interpreter lock rather than for
    the CRM (bench/tracking/sync).
    """
    now = timezone.now()
    stamp = now.strftime("%Y-%m-%dT%H:%M")
    shards = settings.TRACKING_SYNC_SHARDS
    payload = {"cutoff": now.isoformat(), "part": 1, "reason": reason, "shards": shards}
    with transaction.atomic():
        return [
            jobs.enqueue(SYNC_KIND, {**payload, "shard": shard}, key=f"{SYNC_KIND}:{stamp}:{shard + 1}of{shards}")
            for shard in range(shards)
        ]


def profile_sync_run(*, job) -> SyncProgress:
    """One sync job: its shard's users pending at or before the cutoff, until none are left or time is up."""
    cutoff = parse_datetime(job.payload["cutoff"])
    shard, shards = job.payload.get("shard", 0), job.payload.get("shards", 1)
    deadline = time.monotonic() + settings.TRACKING_SYNC_TIME_BUDGET_SECONDS
    progress = _sync_pending(
        cutoff=cutoff,
        deadline=deadline,
        shard=Shard(shard, shards),
        calls_in_flight=max(1, settings.TRACKING_SYNC_CONCURRENCY // shards),
    )
    if progress.remaining:
        part = job.payload["part"] + 1
        base_key = job.key.split("#", 1)[0]
        jobs.enqueue(SYNC_KIND, {**job.payload, "part": part}, key=f"{base_key}#{part}")
    logger.info("tracking_sync_done", synced=progress.synced, failed=progress.failed, remaining=progress.remaining)
    return progress


class PendingUser(NamedTuple):
    """A pending user as the sync pages through them (keyset: pending_since, id)."""

    id: int
    pending_since: datetime
    sub: str


class Delivery(NamedTuple):
    """A profile delivery job the sync runs itself, with what the Kapa refresh needs."""

    user_id: int
    sub: str
    job_id: int


class Shard(NamedTuple):
    number: int
    count: int


def _sync_pending(*, cutoff: datetime, deadline: float, shard: Shard, calls_in_flight: int) -> SyncProgress:
    progress = SyncProgress()
    lock = threading.Lock()
    todo: queue.Queue = queue.Queue(maxsize=settings.TRACKING_SYNC_BATCH)

    in_flight = threading.BoundedSemaphore(calls_in_flight)

    def work(kapa_client):
        # This thread's CRM client, the one its delivery jobs use, shares the bound on calls in flight.
        for client in (kapa_client, crm_client_from_settings()):
            if client is not None:
                client.in_flight = in_flight
        try:
            while (delivery := todo.get()) is not None:
                ok = _deliver_now(delivery, kapa_client)
                with lock:
                    progress.synced += ok
                    progress.failed += not ok
        finally:
            connection.close()  # this thread's own connection

    # Twice as many threads as calls in flight: one thread's database work overlaps another's HTTP wait,
    # so the outside services always have `calls_in_flight` calls open (bench/tracking/sync).
    # One Kapa client (its own connection pool and bound) per thread, made here so a configuration error fails the job.
    threads = [
        threading.Thread(target=work, args=(kapa_client_from_settings(),), daemon=True)
        for _ in range(2 * calls_in_flight)
    ]
    for thread in threads:
        thread.start()
    try:
        after = None
        # Past the deadline no new batch is taken; the threads finish the deliveries already queued.
        while time.monotonic() < deadline:
            batch = _pending_batch(cutoff=cutoff, after=after, size=settings.TRACKING_SYNC_BATCH, shard=shard)
            if not batch:
                break
            for delivery in _queue_deliveries(batch):
                todo.put(delivery)
            after = batch[-1]
    finally:
        for _ in threads:
            todo.put(None)
        for thread in threads:
            thread.join()
    progress.remaining = _pending_batch(cutoff=cutoff, after=None, size=1, shard=shard) != []
    return progress


def _pending_batch(*, cutoff: datetime, after: PendingUser | None, size: int, shard: Shard) -> list[PendingUser]:
    """The shard's pending users, oldest marker first; keyset pagination past `after`."""
    pending = TrackedUser.objects.filter(pending_since__isnull=False, pending_since__lte=cutoff)
    if shard.count > 1:
        pending = pending.alias(shard=Mod("id", shard.count)).filter(shard=shard.number)
    if after:
        pending = pending.filter(
            Q(pending_since__gt=after.pending_since) | Q(pending_since=after.pending_since, id__gt=after.id)
        )
    rows = pending.order_by("pending_since", "id").values_list("id", "pending_since", "sub")[:size]
    return [PendingUser(*row) for row in rows]


def _queue_deliveries(batch: list[PendingUser]) -> list[Delivery]:
    """Clear a batch's markers and write its delivery jobs in one transaction.

    A marker is cleared only if no capture came since the batch was read; a
    newer one stays for the next sync. The jobs are not sent to the workers:
    the sync's threads run them (and if the sync dies first, the sweep sends
    them). A batch at a time, because per user the two writes cost more CPU
    than the delivery itself (bench/tracking/sync).
    """
    unchanged = functools.reduce(operator.or_, (Q(pk=user.id, pending_since=user.pending_since) for user in batch))
    with transaction.atomic():
        TrackedUser.objects.filter(unchanged).update(pending_since=None)
        jobs_queued = jobs.enqueue_many([_delivery_spec(user.id, user.pending_since) for user in batch], dispatch=False)
    return [Delivery(user.id, user.sub, job.pk) for user, job in zip(batch, jobs_queued, strict=True)]


def _deliver_now(delivery: Delivery, kapa_client) -> bool:
    try:
        if kapa_client is not None:
            _kapa_refresh(delivery.user_id, delivery.sub, kapa_client)
        jobs.run_now(delivery.job_id)  # a failed delivery is the job layer's to retry
        return True
    except Exception:
        logger.exception("tracking_sync_user_failed", user_id=delivery.user_id)
        return False


def _kapa_refresh(user_id: int, sub: str, kapa_client) -> None:
    try:
        engagement = kapa_client.fetch_engagement(sub)
    except (jobs.TransientError, jobs.PermanentError) as exc:
        # The profile goes out with the engagement last fetched; tomorrow's sync tries again.
        logger.warning("kapa_refresh_failed", user_id=user_id, error=str(exc)[:200])
        return
    with transaction.atomic():
        user = TrackedUser.objects.select_for_update().filter(pk=user_id).first()
        if user is None:
            return
        changes = {
            **_merged_engagement(engagement, user, kapa_client.competitor_rules),
            "kapa_refreshed_at": timezone.now(),
        }
        for field, value in changes.items():
            setattr(user, field, value)
        # Chatting with the docs bot is the user's own activity (a fetch is not): it moves the retention clock.
        last_interaction = changes["kapa_last_interaction_at"]
        if last_interaction and last_interaction > user.last_activity_at:
            user.last_activity_at = last_interaction
        user.save(update_fields=[*changes, "last_activity_at", "updated_at"])


def _merged_engagement(engagement, user: TrackedUser, competitor_rules) -> dict:
    """The widget's threads as Kapa lists them, plus the threads the user started through the MCP server's
    ask_docs, which Kapa keeps apart and we record (docs_users.activity.kapa_question_record)."""
    asked = [(parse_datetime(entry["at"]), entry["question"]) for entry in user.kapa_asked_questions]
    widget = list(zip(engagement.question_dates, engagement.questions, strict=True))
    # Stable: questions of one widget thread share its date and keep Kapa's newest-first order.
    newest_first = sorted([*widget, *asked], key=lambda dated: dated[0] or _NEVER, reverse=True)
    questions = [question for _, question in newest_first[:MAX_QUESTIONS]]
    last_asked = asked[0][0] if asked else None
    return {
        "kapa_thread_count": engagement.thread_count + user.kapa_asked_thread_count,
        "kapa_last_interaction_at": max(filter(None, [engagement.last_interaction_at, last_asked]), default=None),
        "kapa_questions": questions,
        "kapa_competitor_mentions": count_mentions(questions, competitor_rules),
    }


def profile_deliveries_queue(*, user_ids: list[int]):
    """Deliver these users' profiles now, outside the daily sync (admin, backfill): their markers are
    cleared and the deliveries go to the workers, in one transaction."""
    now = timezone.now()
    with transaction.atomic():
        TrackedUser.objects.filter(pk__in=user_ids).update(pending_since=None)
        return jobs.enqueue_many([_delivery_spec(user_id, now) for user_id in user_ids])


def _delivery_spec(user_id: int, marker: datetime) -> jobs.JobSpec:
    """One delivery per user and marker; the key is also the webhook-id the CRM deduplicates on."""
    return jobs.JobSpec(
        DELIVER_KIND,
        {"user_id": user_id},
        key=f"{DELIVER_KIND}:{user_id}:{int(marker.timestamp() * 1_000_000)}",
        max_attempts=DELIVER_MAX_ATTEMPTS,
    )


def profile_deliver(*, user_id: int, webhook_id: str) -> dict:
    """Build the user's profile now (coalesced: the latest state) and POST it; raises SkipJob when off."""
    client = crm_client_from_settings()
    if client is None:
        raise jobs.SkipJob("CRM_WEBHOOK_URL is not set: delivery is off")
    # Not the ORM: compiling its SELECT of this wide row cost more CPU than the HTTP call (bench/tracking/sync).
    found = fetch_models(TrackedUser, f"SELECT {{columns}} FROM {TrackedUser._meta.db_table} WHERE id = %s", [user_id])
    user = found[0] if found else None
    if user is None:
        raise jobs.SkipJob("the user no longer exists (retention)")
    profile = crm_profile(user)
    client.deliver(profile, webhook_id=webhook_id)
    _record_delivery(user_id, profile)
    return profile


def _record_delivery(user_id: int, profile: dict) -> None:
    """The payload as sent, for admin; plain SQL for the same reason as the read above."""
    payload_field = TrackedUser._meta.get_field("last_delivered_payload")
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {TrackedUser._meta.db_table}"
            " SET last_delivered_at = %s, last_delivered_payload = %s WHERE id = %s",
            [
                connection.ops.adapt_datetimefield_value(timezone.now()),
                payload_field.get_db_prep_save(profile, connection),
                user_id,
            ],
        )


def retention_start():
    """Queue a retention pass; triggers within the same minute share one job."""
    key = f"{RETENTION_KIND}:{timezone.now().strftime('%Y-%m-%dT%H:%M')}"
    return jobs.enqueue(RETENTION_KIND, {"part": 1}, key=key)


def retention_run(*, job) -> int:
    """Delete one batch of inactive users; a full batch queues the next part."""
    deleted = tracked_users_delete_inactive(batch_size=settings.TRACKING_RETENTION_BATCH)
    if deleted == settings.TRACKING_RETENTION_BATCH:
        part = job.payload["part"] + 1
        jobs.enqueue(RETENTION_KIND, {"part": part}, key=f"{job.key.split('#', 1)[0]}#{part}")
    logger.info("tracking_retention_done", deleted=deleted)
    return deleted


def tracked_users_delete_inactive(*, batch_size: int) -> int:
    """Delete up to `batch_size` users without genuine activity for LEAD_RETENTION_DAYS, oldest first."""
    cutoff = timezone.now() - timedelta(days=settings.LEAD_RETENTION_DAYS)
    inactive = TrackedUser.objects.filter(last_activity_at__lt=cutoff)
    with transaction.atomic():
        ids = list(inactive.order_by("last_activity_at").values_list("id", flat=True)[:batch_size])
        # Re-checked in the DELETE: a user active since the SELECT is kept.
        deleted, _ = inactive.filter(id__in=ids).delete()
    return deleted
