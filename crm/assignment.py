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
   is stamped.
3. Else nobody: None, the task stays unassigned and anyone at the store may take it.

The store's reps who are not away are read once, locked (SELECT … FOR UPDATE)
in one order, so concurrent picks queue and each sees the previous pick's
stamp and task. Run inside the transaction that writes the tasks, so the lock
and the stamps commit with the tasks that count against the reps' caps.
"""

import functools
from collections.abc import Sequence
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from django.contrib.auth import get_user_model
from django.db.models import Count, OuterRef, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from crm.models import AssignmentRule, RepProfile, Task
from foundation.db import update_many
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


def _takes_new_lead(profile: RepProfile, *, now: datetime) -> bool:
    return not profile.is_away and profile.open_tasks < profile.max_open_tasks and rep_on_shift(profile, now=now)


class _StoreReps:
    """A store's reps who are not away, locked until the transaction ends (SELECT … FOR UPDATE, in one order:
    concurrent picks queue, each seeing the previous pick's stamp and task), each with the number of pending tasks
    assigned to them, and the store's active rules that name one of them. Picks count their own tasks and
    stamps, so several picks in one transaction come out as the same picks one after another would."""

    def __init__(self, store_id: int | None):
        reps = store_reps(store_id=store_id)
        pending = Task.objects.filter(assigned_to=OuterRef("user_id"), status=Task.Status.PENDING)
        open_tasks = pending.order_by().values("assigned_to").annotate(n=Count("pk")).values("n")
        self.profiles = {
            p.user_id: p
            for p in RepProfile.objects.filter(user__in=reps, is_away=False)
            .annotate(open_tasks=Coalesce(Subquery(open_tasks), 0))
            .select_for_update(of=("self",))
            .order_by("pk")
        }
        self.store_id = store_id
        self.stamped: list[RepProfile] = []

    @functools.cached_property
    def rules(self) -> list[tuple[str, str, int]]:
        """(service type, channel, owner) of the active rules naming one of the reps, in order; read only for a
        new task's pick (round-robin alone needs none), and only when there is a rep to name."""
        if not self.profiles:  # a rule's owner takes a lead only as a rep who is not away
            return []
        rules = AssignmentRule.objects.filter(is_active=True, store_id=self.store_id, owner__in=self.profiles)
        return list(rules.order_by("priority", "pk").values_list("service_type", "channel", "owner_id"))

    def pick(self, *, service_type: str, channel: str, now: datetime) -> int | None:
        """The owner of a new task: the first matching rule's owner who takes a new lead, else round-robin."""
        for rule_service_type, rule_channel, owner_id in self.rules:
            if rule_service_type in ("", service_type or "") and rule_channel in ("", channel or ""):
                profile = self.profiles[owner_id]
                if _takes_new_lead(profile, now=now):
                    profile.open_tasks += 1
                    return owner_id
        return self.round_robin(now=now)

    def round_robin(self, *, now: datetime, exclude_user_id: int | None = None) -> int | None:
        """Of the reps who take a new lead now (not `exclude_user_id`), the one chosen longest ago (never chosen
        first), stamped; None when there is nobody."""
        eligible = [p for p in self.profiles.values() if p.user_id != exclude_user_id and _takes_new_lead(p, now=now)]
        if not eligible:
            return None
        chosen = min(eligible, key=lambda p: (p.last_assigned_at is not None, p.last_assigned_at or now, p.pk))
        # Strictly after every rep's stamp, so the rotation holds even when the clock has not moved.
        stamps = [p.last_assigned_at for p in self.profiles.values() if p.last_assigned_at is not None]
        chosen.last_assigned_at = max([timezone.now(), *(s + timedelta(microseconds=1) for s in stamps)])
        chosen.open_tasks += 1
        if chosen not in self.stamped:
            self.stamped.append(chosen)
        return chosen.user_id

    def save(self) -> None:
        """The stamps of the reps round-robin chose."""
        update_many(self.stamped, ["last_assigned_at"])
        self.stamped = []


def round_robin_pick(*, store_id: int | None, now: datetime, exclude_user_id: int | None = None) -> int | None:
    """The store's next rep who takes a new lead now (not `exclude_user_id`), stamped as chosen; else None."""
    reps = _StoreReps(store_id)
    owner = reps.round_robin(now=now, exclude_user_id=exclude_user_id)
    reps.save()
    return owner


def task_owners_pick(picks: Sequence[tuple[int | None, str, str]], *, now: datetime | None = None) -> list[int | None]:
    """The owners of new outreach tasks, in order: one (store id or None for the shared pool, service type,
    channel) each; a user id, or None for nobody. The stores' reps are locked store by store, the shared pool
    first, then by id: concurrent callers take those locks in one order."""
    now = now or timezone.now()
    stores = {store_id: _StoreReps(store_id) for store_id in sorted({p[0] for p in picks}, key=lambda s: s or 0)}
    owners = [stores[store_id].pick(service_type=st, channel=ch, now=now) for store_id, st, ch in picks]
    for reps in stores.values():
        reps.save()
    return owners


def task_owner_pick(
    *, store_id: int | None, service_type: str, channel: str, now: datetime | None = None
) -> int | None:
    """The owner of a new outreach task of the store (None: the shared pool): the user id, or None for nobody."""
    return task_owners_pick([(store_id, service_type, channel)], now=now)[0]


def rep_away_set(*, user_id: int, away: bool) -> bool:
    """A rep's own away switch: away takes no new lead whatever the hours. False when the user is no rep."""
    return RepProfile.objects.filter(user_id=user_id).update(is_away=away) == 1
