"""Reads of the CRM for the back office: first-response figures, contacted leads, the sales work queue.

Every figure takes the stores it covers (`store_ids`, None for every store):
the caller applies store-level isolation once (stores.scoping), so a figure
cannot leak another store's numbers. docs/backoffice.md says what each means.
"""

import statistics
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.contrib.postgres.fields import ArrayField
from django.db import connection
from django.db.models import Case, Count, DurationField, ExpressionWrapper, F, FloatField, Func, Q, When
from django.utils import timezone

from crm.models import Task

DUE_SOON = timedelta(hours=24)


def _in_stores(queryset, store_ids):
    return queryset if store_ids is None else queryset.filter(store__in=store_ids)


def leads_contacted_count(*, start, end, store_ids=None) -> int:
    """Leads recorded in [start, end) whose outreach task is done (a lead has at most one task).

    Read from the task alone (its copy of the lead's recording time), through crm_task_done_lead_idx.
    """
    tasks = Task.objects.filter(lead_recorded_at__gte=start, lead_recorded_at__lt=end, status=Task.Status.DONE)
    return _in_stores(tasks, store_ids).count()


# --- first-response SLA --------------------------------------------------------------------------


@dataclass(frozen=True)
class FirstResponse:
    due: int  # outreach tasks due in the period
    done: int  # of those, done
    done_within_sla: int  # of those, done by their due time
    median_seconds: float | None  # lead arrival → task done, over the done ones
    p90_seconds: float | None
    overdue_now: int  # pending outreach tasks past their due time, whatever the period

    @property
    def share_within_sla(self) -> float | None:
        return self.done_within_sla / self.due if self.due else None


class _PercentilesCont(Func):
    """PostgreSQL's ordered-set aggregate over several fractions at once (one sort); Django has none built in.

    NULLs are skipped, as by every aggregate: the rows to leave out are given NULL.
    """

    contains_aggregate = True
    output_field = ArrayField(FloatField())
    template = "percentile_cont(ARRAY[%(fractions)s]::float8[]) WITHIN GROUP (ORDER BY %(expressions)s)"

    def __init__(self, expression, fractions: tuple[float, ...]):
        super().__init__(expression, fractions=", ".join(str(float(f)) for f in fractions))


def first_response(*, start, end, store_ids=None, now: datetime | None = None) -> FirstResponse:
    """Outreach tasks due in [start, end): how many, done, done by their due time, arrival → done; overdue now.

    One pass over the period's tasks (the due_at index); the arrival is the task's own copy (Task.arrived_at).
    """
    now = now or timezone.now()
    outreach = _in_stores(Task.objects.filter(task_type=Task.TaskType.LEAD_OUTREACH), store_ids)
    in_period = outreach.filter(due_at__gte=start, due_at__lt=end)
    done = Q(status=Task.Status.DONE, completed_at__isnull=False)
    response = ExpressionWrapper(F("completed_at") - F("arrived_at"), output_field=DurationField())
    counts = {
        "due": Count("pk"),
        "done": Count("pk", filter=Q(status=Task.Status.DONE)),
        "done_within_sla": Count("pk", filter=Q(status=Task.Status.DONE, completed_at__lte=F("due_at"))),
    }
    if connection.vendor == "postgresql":
        seconds = Case(When(done, then=Func(response, template="EXTRACT(EPOCH FROM %(expressions)s)")))
        figures = in_period.aggregate(**counts, quantiles=_PercentilesCont(seconds, (0.5, 0.9)))
        median, p90 = figures.pop("quantiles") or (None, None)
    else:
        # SQLite (the zero-setup run) has no percentile aggregate: the same figures computed here.
        figures = in_period.aggregate(**counts)
        responses = in_period.filter(done).annotate(r=response).values_list("r", flat=True)
        durations = sorted(d.total_seconds() for d in responses)
        median, p90 = _quantile(durations, 0.5), _quantile(durations, 0.9)
    overdue_now = outreach.filter(status=Task.Status.PENDING, due_at__lt=now).count()
    return FirstResponse(**figures, median_seconds=median, p90_seconds=p90, overdue_now=overdue_now)


def _quantile(values: list[float], fraction: float) -> float | None:
    """Linear interpolation between the closest ranks, as percentile_cont does."""
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[round(fraction * 100) - 1]


# --- the contact page ----------------------------------------------------------------------------


def contact_lead_ids(*, contact) -> list[int]:
    """The leads behind a contact: each lead.created event on its timeline names one."""
    ids = contact.timeline.filter(entity_type="lead").values_list("entity_id", flat=True)
    return [int(pk) for pk in ids if pk.isdigit()]


# --- owners --------------------------------------------------------------------------------------


def task_assignees(*, store_ids):
    """Active staff who may own a task of one of `store_ids`: the staff assigned to those stores."""
    from django.contrib.auth import get_user_model

    staff = get_user_model().objects.filter(is_staff=True, is_active=True, stores__in=store_ids)
    return staff.distinct().order_by("username")


# --- work queue ----------------------------------------------------------------------------------


def tasks_mine(*, user, store_ids):
    """Pending tasks assigned to `user`, and the unassigned ones of the user's stores; soonest due first.

    Always within `store_ids`: a task assigned to the user in a store they no longer work is not theirs to see.
    """
    mine = Q(assigned_to=user)
    if store_ids is not None:
        mine |= Q(assigned_to__isnull=True)
    return _queue(_in_stores(Task.objects.filter(mine, status=Task.Status.PENDING), store_ids))


def tasks_due_soon(*, store_ids, now: datetime | None = None):
    """Pending tasks of the user's stores (every store when unassigned) due within DUE_SOON, overdue included."""
    now = now or timezone.now()
    pending = Task.objects.filter(status=Task.Status.PENDING, due_at__lt=now + DUE_SOON)
    return _queue(_in_stores(pending, store_ids))


def _queue(queryset):
    return queryset.select_related("contact", "store", "assigned_to").order_by("due_at")
