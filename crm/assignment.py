"""Who owns a new outreach task: a named owner by rule, else the next rep on shift, round-robin.

A rep is a staff user with a RepProfile. A rep takes a new lead when on shift
(a work day, within the working hours in the rep's time zone), not away and
under the cap of pending tasks assigned to them (across every store). The
reps of a store are its staff (Store.staff); the reps of the shared pool (leads
of no store) are the reps who see every store, since nobody else can see those
tasks.

1. The active AssignmentRules of the store (of no store: the shared pool's)
   whose service type and channel match (blank = any), lowest priority first:
   the first whose owner is a rep of the store and takes a new lead now.
2. Else round-robin: of the store's reps who take a new lead now, the one
   round-robin chose longest ago (never chosen first); their `last_assigned_at`
   is stamped. The candidates are locked (SELECT … FOR UPDATE) in one order, so
   concurrent picks queue and each sees the previous pick's stamp and task.
3. Else nobody: None, the task stays unassigned and anyone at the store may take it.

Run inside the transaction that writes the task, so the lock and the stamp
commit with the task that counts against the rep's cap.
"""

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from django.contrib.auth import get_user_model
from django.db.models import Count, Q
from django.utils import timezone

from crm.models import AssignmentRule, RepProfile, Task
from stores.scoping import VIEW_ALL_STORES_PERMISSION

MODEL_BACKEND = "django.contrib.auth.backends.ModelBackend"  # where permissions live (axes only authenticates)


def rep_on_shift(profile: RepProfile, *, now: datetime) -> bool:
    """Whether `now` is within the rep's working hours on one of their work days, in their time zone.

    Hours may span midnight (22:00–06:00: the small hours belong to the day the
    shift started). Equal start and end: the whole work day.
    """
    local = now.astimezone(ZoneInfo(profile.timezone))
    wall, days = local.time().replace(tzinfo=None), set(profile.work_days or [])
    start, end = profile.work_start, profile.work_end
    if start == end:
        return local.isoweekday() in days
    if start < end:
        return local.isoweekday() in days and start <= wall < end
    if wall >= start:
        return local.isoweekday() in days
    return wall < end and (local - timedelta(days=1)).isoweekday() in days


def store_reps(*, store_id: int | None):
    """The users who may own tasks of the store (of the shared pool when None), whether reps or not."""
    users = get_user_model().objects.filter(is_active=True, is_staff=True)
    if store_id is None:
        # Superusers, and holders of the permission directly or through a group (the Managers).
        every_store = get_user_model().objects.with_perm(VIEW_ALL_STORES_PERMISSION, backend=MODEL_BACKEND)
        return users.filter(pk__in=every_store.values("pk"))
    return users.filter(stores=store_id)


def _open_tasks(user_ids) -> dict[int, int]:
    pending = Task.objects.filter(assigned_to__in=user_ids, status=Task.Status.PENDING)
    return dict(pending.values("assigned_to").annotate(n=Count("pk")).values_list("assigned_to", "n"))


def _takes_new_lead(profile: RepProfile, *, open_tasks: dict[int, int], now: datetime) -> bool:
    return (
        not profile.is_away
        and open_tasks.get(profile.user_id, 0) < profile.max_open_tasks
        and rep_on_shift(profile, now=now)
    )


def _rule_owner(*, store_id, service_type: str, channel: str, now: datetime) -> int | None:
    rules = AssignmentRule.objects.filter(
        Q(service_type="") | Q(service_type=service_type or ""),
        Q(channel="") | Q(channel=channel or ""),
        is_active=True,
        store_id=store_id,
        owner__in=store_reps(store_id=store_id),
    ).order_by("priority", "pk")
    owners = list(rules.values_list("owner_id", flat=True))
    if not owners:
        return None
    profiles = {p.user_id: p for p in RepProfile.objects.filter(user_id__in=owners)}
    open_tasks = _open_tasks(owners)
    for owner_id in owners:
        profile = profiles.get(owner_id)
        if profile is not None and _takes_new_lead(profile, open_tasks=open_tasks, now=now):
            return owner_id
    return None


def round_robin_pick(*, store_id: int | None, now: datetime, exclude_user_id: int | None = None) -> int | None:
    """The store's next rep who takes a new lead now (not `exclude_user_id`), stamped as chosen; else None."""
    candidates = RepProfile.objects.filter(user__in=store_reps(store_id=store_id), is_away=False)
    if exclude_user_id is not None:
        candidates = candidates.exclude(user_id=exclude_user_id)
    # One lock order for every pick: concurrent picks wait for each other, never deadlock.
    profiles = list(candidates.select_for_update().order_by("pk"))
    open_tasks = _open_tasks([p.user_id for p in profiles])
    eligible = [p for p in profiles if _takes_new_lead(p, open_tasks=open_tasks, now=now)]
    if not eligible:
        return None
    chosen = min(eligible, key=lambda p: (p.last_assigned_at is not None, p.last_assigned_at or now, p.pk))
    # Strictly after every candidate's stamp, so the rotation holds even when the clock has not moved.
    stamps = [p.last_assigned_at for p in profiles if p.last_assigned_at is not None]
    stamp = max([timezone.now(), *(s + timedelta(microseconds=1) for s in stamps)])
    RepProfile.objects.filter(pk=chosen.pk).update(last_assigned_at=stamp)
    return chosen.user_id


def task_owner_pick(
    *, store_id: int | None, service_type: str, channel: str, now: datetime | None = None
) -> int | None:
    """The owner of a new outreach task of the store (None: the shared pool): the user id, or None for nobody."""
    now = now or timezone.now()
    owner = _rule_owner(store_id=store_id, service_type=service_type, channel=channel, now=now)
    if owner is not None:
        return owner
    return round_robin_pick(store_id=store_id, now=now)


def rep_away_set(*, user_id: int, away: bool) -> bool:
    """A rep's own away switch: away takes no new lead whatever the hours. False when the user is no rep."""
    return RepProfile.objects.filter(user_id=user_id).update(is_away=away) == 1
