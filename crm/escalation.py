"""Tasks past their due time without a response: the owner's manager is alerted, and the task may move on.

Every TASK_ESCALATION_CHECK_SECONDS beat queues one `crm.escalate_overdue` job,
which takes the pending tasks whose due time has passed and that were not
escalated since (a snoozed task that passes its new due time is escalated
again), leaving those of a store in its quiet hours (the shared pool: its own
quiet hours) for the first check after they end. For each task, in one
transaction with the task locked:

- `escalated_at` is stamped and `task.escalated` goes on the contact's timeline;
- a `crm.escalation_alert` job emails the owner's manager (RepProfile.manager),
  else the store's managers (see `escalation_recipients`); its payload holds
  ids only, the email names no lead, only links to the task;
- when the store reassigns overdue tasks (Store.reassign_overdue; the shared
  pool: SHARED_POOL_REASSIGN_OVERDUE), the task goes to the next rep on shift
  by round-robin (not the owner it had), recorded as `task.reassigned`; with
  nobody eligible it stays where it is.
"""

from datetime import datetime, time
from zoneinfo import ZoneInfo

import structlog
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import EmailMessage
from django.db import transaction
from django.db.models import F, Q
from django.urls import reverse
from django.utils import timezone

import jobs
from crm.assignment import MODEL_BACKEND, round_robin_pick
from crm.models import RepProfile, Task, TimelineEvent
from crm.sla import in_quiet_hours
from integrations.mail import send_message_once
from stores.models import Store
from stores.scoping import VIEW_ALL_STORES_PERMISSION

logger = structlog.get_logger(__name__)

ESCALATE_KIND = "crm.escalate_overdue"
ALERT_KIND = "crm.escalation_alert"
TASK_ESCALATED_EVENT = "task.escalated"
TASK_REASSIGNED_EVENT = "task.reassigned"
# Who manages reps: alerted about overdue tasks of their stores when a rep has no manager of their own.
MANAGER_PERMISSION = "crm.change_repprofile"
BATCH = 200


def escalation_start() -> None:
    """Queue one escalation pass; triggers within the same minute share one job."""
    jobs.enqueue(ESCALATE_KIND, {}, key=f"{ESCALATE_KIND}:{timezone.now():%Y-%m-%dT%H:%M}")


def _quiet(now: datetime, *, zone: ZoneInfo, start: time, end: time) -> bool:
    return in_quiet_hours(now.astimezone(zone).time().replace(tzinfo=None), start=start, end=end)


def _quiet_now(now: datetime) -> tuple[list[int], bool]:
    """The stores in their quiet hours at `now`, and whether the shared pool is in its own."""
    stores = Store.objects.only("timezone", "quiet_hours_start", "quiet_hours_end")
    quiet_ids = [s.pk for s in stores if _quiet(now, zone=s.zone, start=s.quiet_hours_start, end=s.quiet_hours_end)]
    pool = _quiet(
        now,
        zone=ZoneInfo(settings.SHARED_POOL_TIMEZONE),
        start=settings.SHARED_POOL_QUIET_HOURS_START,
        end=settings.SHARED_POOL_QUIET_HOURS_END,
    )
    return quiet_ids, pool


def overdue_tasks(*, now: datetime):
    """Pending tasks past their due time, not escalated since it passed, of stores outside their quiet hours."""
    quiet_ids, pool_quiet = _quiet_now(now)
    overdue = Task.objects.filter(status=Task.Status.PENDING, due_at__lte=now).filter(
        Q(escalated_at__isnull=True) | Q(escalated_at__lt=F("due_at"))
    )
    if quiet_ids:
        overdue = overdue.exclude(store__in=quiet_ids)
    if pool_quiet:
        overdue = overdue.exclude(store__isnull=True)
    return overdue


def overdue_tasks_escalate(*, now: datetime | None = None) -> int:
    """Escalate every overdue task (see the module); returns how many. One transaction per batch.

    Tasks locked by someone acting on them right now are left for the next pass.
    """
    now = now or timezone.now()
    escalated = 0
    while True:
        with transaction.atomic():
            batch = list(
                overdue_tasks(now=now)
                .select_for_update(of=("self",), skip_locked=True)
                .select_related("store", "assigned_to")
                .order_by("due_at", "pk")[:BATCH]
            )
            # Store by store: a reassignment locks the store's reps, and concurrent passes must take those
            # locks in one order.
            alerts = [
                _task_escalate(task, now=now) for task in sorted(batch, key=lambda t: (t.store_id or 0, t.due_at))
            ]
            jobs.enqueue_many(alerts)
        escalated += len(batch)
        if len(batch) < BATCH:
            break
    logger.info("tasks_escalated", count=escalated)
    return escalated


def _event(task: Task, *, event_type: str, now: datetime, **values) -> TimelineEvent:
    return TimelineEvent(
        contact_id=task.contact_id, store_id=task.store_id, franchise=task.franchise, account_id=task.account_id,
        event_type=event_type, event_category="task", entity_type="task", entity_id=str(task.pk), occurred_at=now,
        actor_type="system", new_value=values, idempotency_key=f"{event_type}:{task.pk}:{task.due_at.isoformat()}",
    )  # fmt: skip


def _reassigns(task: Task) -> bool:
    return task.store.reassign_overdue if task.store_id else settings.SHARED_POOL_REASSIGN_OVERDUE


def _task_escalate(task: Task, *, now: datetime) -> jobs.JobSpec:
    owner = task.assigned_to
    owner_name = owner.get_username() if owner else ""
    events = [_event(task, event_type=TASK_ESCALATED_EVENT, now=now, owner=owner_name, due_at=task.due_at.isoformat())]
    changes = {"escalated_at": now}  # not updated_at: a page showing the task may still act on it
    new_owner_id = None
    if _reassigns(task):
        new_owner_id = round_robin_pick(store_id=task.store_id, now=now, exclude_user_id=owner.pk if owner else None)
    if new_owner_id is not None:
        new_owner = get_user_model().objects.get(pk=new_owner_id).get_username()
        changes |= {"assigned_to_id": new_owner_id, "updated_at": now}
        events.append(
            _event(task, event_type=TASK_REASSIGNED_EVENT, now=now, reason="overdue", by="system",
                   **{"from": owner_name, "to": new_owner})
        )  # fmt: skip
    Task.objects.filter(pk=task.pk).update(**changes)
    TimelineEvent.objects.bulk_create(events, ignore_conflicts=True)
    due = task.due_at.isoformat()
    return jobs.JobSpec(
        kind=ALERT_KIND,
        payload={"task_id": str(task.pk), "owner_id": owner.pk if owner else None, "due_at": due},
        key=f"{ALERT_KIND}:{task.pk}:{due}",
        store_id=task.store_id,
    )


def escalation_recipients(*, owner_id: int | None, store_id: int | None) -> list[str]:
    """Who hears that a task of `owner_id` at `store_id` is overdue: email addresses.

    The owner's manager when the owner has one (active, with an address).
    Else the store's managers: active staff holding MANAGER_PERMISSION (the
    Managers group, or given to a store's own lead) who work at the store or
    see every store; for the shared pool, those who see every store.
    Superusers are not alerted for being superusers.
    """
    users = get_user_model().objects.filter(is_active=True, is_staff=True).exclude(email="")
    if owner_id is not None:
        manager = RepProfile.objects.filter(user_id=owner_id).values_list("manager_id", flat=True).first()
        address = users.filter(pk=manager).values_list("email", flat=True).first() if manager else None
        if address:
            return [address]
    with_perm = get_user_model().objects.with_perm
    managers = with_perm(MANAGER_PERMISSION, include_superusers=False, backend=MODEL_BACKEND).values("pk")
    every_store = with_perm(VIEW_ALL_STORES_PERMISSION, include_superusers=False, backend=MODEL_BACKEND).values("pk")
    near = Q(pk__in=every_store) if store_id is None else Q(pk__in=every_store) | Q(stores=store_id)
    return sorted(set(users.filter(near, pk__in=managers).values_list("email", flat=True)))


def escalation_alert_send(job) -> None:
    """Email the manager(s) that a task passed its due time; skipped when it was answered meanwhile."""
    task = Task.objects.select_related("store", "assigned_to").filter(pk=job.payload["task_id"]).first()
    if task is None or task.status != Task.Status.PENDING:
        raise jobs.SkipJob("the task was answered or removed before the alert went out")
    owner_id = job.payload["owner_id"]
    recipients = escalation_recipients(owner_id=owner_id, store_id=task.store_id)
    if not recipients:
        raise jobs.SkipJob("nobody to alert: no manager for the owner, no manager for the store")
    owner = get_user_model().objects.filter(pk=owner_id).first() if owner_id else None
    where = str(task.store) if task.store_id else "the shared pool"
    zone = task.store.zone if task.store_id else ZoneInfo(settings.SHARED_POOL_TIMEZONE)
    due = datetime.fromisoformat(job.payload["due_at"]).astimezone(zone)
    url = settings.SITE_URL.rstrip("/") + reverse("admin:crm_task_change", args=[task.pk])
    lines = [
        f"A lead outreach task of {where} was due at {due:%Y-%m-%d %H:%M %Z} and has no response yet.",
        f"Owner: {owner.get_username() if owner else 'nobody (unassigned)'}.",
    ]
    if task.assigned_to_id != owner_id:
        now_with = task.assigned_to.get_username() if task.assigned_to else "nobody"
        lines.append(f"It has been reassigned to {now_with}.")
    lines.append(f"\nOpen it in admin: {url}\n")
    subject = f"[leadgen] overdue task at {where}"
    send_message_once(job, EmailMessage(subject=subject, body="\n".join(lines), to=recipients))
    logger.info("escalation_alert_sent", task_id=str(task.pk), recipients=len(recipients))
