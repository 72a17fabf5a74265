"""Reads of the CRM for the back office: first-response figures, contacted leads, the sales work queue,
likely duplicate contacts.

Every figure takes the stores it covers (`store_ids`, None for every store):
the caller applies store-level isolation once (stores.scoping), so a figure
cannot leak another store's numbers. docs/backoffice.md says what each means.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import groupby

from django.contrib.postgres.fields import ArrayField
from django.db.models import (
    Case,
    CharField,
    Count,
    DurationField,
    ExpressionWrapper,
    F,
    FloatField,
    Func,
    Max,
    Q,
    Value,
    When,
)
from django.db.models.functions import Concat, Lower, Replace, StrIndex, Substr, Trim
from django.db.models.lookups import In
from django.utils import timezone

from crm.assignment import store_reps
from crm.models import Contact, Task, TimelineEvent

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

    def get_group_by_cols(self):
        return []  # an aggregate: in a grouped query its argument is not a grouping column


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
    seconds = Case(When(done, then=Func(response, template="EXTRACT(EPOCH FROM %(expressions)s)")))
    figures = in_period.aggregate(**counts, quantiles=_PercentilesCont(seconds, (0.5, 0.9)))
    median, p90 = figures.pop("quantiles") or (None, None)
    overdue_now = outreach.filter(status=Task.Status.PENDING, due_at__lt=now).count()
    return FirstResponse(**figures, median_seconds=median, p90_seconds=p90, overdue_now=overdue_now)


@dataclass(frozen=True)
class RepFirstResponse:
    """One owner's outreach tasks due in the period; `user_id` None: the tasks nobody owns."""

    user_id: int | None
    username: str
    due: int
    done: int
    done_within_sla: int
    median_seconds: float | None  # lead arrival → task done, over the done ones
    overdue_now: int  # pending and past their due time, whatever the period

    @property
    def share_within_sla(self) -> float | None:
        return self.done_within_sla / self.due if self.due else None


def first_response_by_rep(*, start, end, store_ids=None, now: datetime | None = None) -> list[RepFirstResponse]:
    """`first_response` per task owner (the owner now: a reassigned task counts for whom it went to).

    Owners with a task due in the period or overdue now; the unassigned tasks last. One grouped pass over
    the period's tasks and the overdue ones.
    """
    now = now or timezone.now()
    due_in_period = Q(due_at__gte=start, due_at__lt=end)
    overdue_now = Q(status=Task.Status.PENDING, due_at__lt=now)
    outreach = Task.objects.filter(due_in_period | overdue_now, task_type=Task.TaskType.LEAD_OUTREACH)
    tasks = _in_stores(outreach, store_ids)
    done = Q(due_in_period, status=Task.Status.DONE, completed_at__isnull=False)
    response = ExpressionWrapper(F("completed_at") - F("arrived_at"), output_field=DurationField())
    counts = {
        "due": Count("pk", filter=due_in_period),
        "done": Count("pk", filter=Q(due_in_period, status=Task.Status.DONE)),
        "done_within_sla": Count("pk", filter=Q(due_in_period, status=Task.Status.DONE, completed_at__lte=F("due_at"))),
        "overdue_now": Count("pk", filter=overdue_now),
    }
    groups = tasks.values("assigned_to", "assigned_to__username").order_by()
    seconds = Case(When(done, then=Func(response, template="EXTRACT(EPOCH FROM %(expressions)s)")))
    rows = list(groups.annotate(**counts, median=_PercentilesCont(seconds, (0.5,))))
    medians = {row["assigned_to"]: (row.pop("median") or [None])[0] for row in rows}
    figures = [
        RepFirstResponse(
            user_id=row["assigned_to"],
            username=row["assigned_to__username"] or "",
            due=row["due"],
            done=row["done"],
            done_within_sla=row["done_within_sla"],
            median_seconds=medians.get(row["assigned_to"]),
            overdue_now=row["overdue_now"],
        )
        for row in rows
    ]
    return sorted(figures, key=lambda rep: (rep.user_id is None, rep.username))


# --- the contact page ----------------------------------------------------------------------------


def contact_lead_ids(*, contact) -> list[int]:
    """The leads behind a contact: each lead.created event on its timeline names one."""
    ids = contact.timeline.filter(entity_type="lead").values_list("entity_id", flat=True)
    return [int(pk) for pk in ids if pk.isdigit()]


TIMELINE_LIMIT = 200  # events shown on the contact page; the timeline's own list has them all


@dataclass(frozen=True)
class TimelineEntry:
    """One touchpoint on a contact's page: a timeline event, with the row it names when the viewer may read it,
    or a prototype of one of the contact's leads (its state read live)."""

    at: datetime
    kind: str  # the event type, or "prototype"
    event: TimelineEvent | None = None
    lead: object = None  # lead.created: the lead, with its answers
    answers: tuple[tuple[str, str], ...] = ()  # the form's steps as (question, answer)
    chat: object = None  # chat.linked: the chat session, with its messages
    prototype: object = None


def _answers(lead) -> tuple[tuple[str, str], ...]:
    steps = lead.steps if isinstance(lead.steps, dict) else {}
    return tuple((str(q), ", ".join(map(str, a)) if isinstance(a, list) else str(a)) for q, a in steps.items())


def contact_timeline(
    *, contact, leads=None, chat_sessions=None, prototypes=None, limit: int = TIMELINE_LIMIT
) -> tuple[list[TimelineEntry], bool]:
    """The contact's touchpoints, newest first, and whether older ones were left out (more than `limit`).

    One query (the latest events); the rows the events name come from what the page read already, and only
    those the viewer may read are passed (None: not shown): `leads` (lead.created shows the form's answers),
    `chat_sessions` (chat.linked shows the conversation's start) and `prototypes` (each an entry of its own,
    at its request, in its state now).
    """
    events = list(contact.timeline.order_by("-occurred_at", "-pk")[: limit + 1])
    truncated = len(events) > limit
    leads = {str(lead.pk): lead for lead in leads or ()}
    chats = {str(session.pk): session for session in chat_sessions or ()}
    entries = []
    for event in events[:limit]:
        lead = leads.get(event.entity_id) if event.entity_type == "lead" else None
        chat = chats.get(event.entity_id) if event.entity_type == "chat_session" else None
        entries.append(
            TimelineEntry(at=event.occurred_at, kind=event.event_type, event=event, lead=lead,
                          answers=_answers(lead) if lead is not None else (), chat=chat)  # fmt: skip
        )
    oldest = entries[-1].at if truncated else None
    entries += [
        TimelineEntry(at=prototype.created_at, kind="prototype", prototype=prototype)
        for prototype in prototypes or ()
        if oldest is None or prototype.created_at >= oldest
    ]
    entries.sort(key=lambda entry: entry.at, reverse=True)
    return entries, truncated


# --- owners --------------------------------------------------------------------------------------


def task_assignees(*, store_ids, shared_pool: bool = False):
    """Active staff who may own a task of one of `store_ids`: the staff assigned to those stores, and with
    `shared_pool` (tasks of no store) the staff who see every store, who alone see those tasks."""
    from django.contrib.auth import get_user_model

    may_own = Q(stores__in=store_ids)
    if shared_pool:
        may_own |= Q(pk__in=store_reps(store_id=None).values("pk"))
    staff = get_user_model().objects.filter(may_own, is_staff=True, is_active=True)
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


WORK_QUEUE_LIMIT = 200  # tasks one tab shows; the task list has them all
WORK_QUEUE_TITLES = {"mine": "My tasks", "due_soon": "Due soon"}


@dataclass(frozen=True)
class WorkQueue:
    view: str  # a key of WORK_QUEUE_TITLES
    title: str
    tasks: list[Task]  # the WORK_QUEUE_LIMIT soonest due
    truncated: bool  # more are pending than shown
    limit: int
    now: datetime  # the instant "due soon" and "overdue" are measured from


def work_queue(*, user, store_ids, view: str | None, now: datetime | None = None) -> WorkQueue:
    """One tab of the sales work queue: "due_soon" (tasks_due_soon), else "mine" (tasks_mine)."""
    now = now or timezone.now()
    view = "due_soon" if view == "due_soon" else "mine"
    if view == "due_soon":
        tasks = tasks_due_soon(store_ids=store_ids, now=now)
    else:
        tasks = tasks_mine(user=user, store_ids=store_ids)
    rows = list(tasks[: WORK_QUEUE_LIMIT + 1])
    return WorkQueue(
        view=view, title=WORK_QUEUE_TITLES[view], tasks=rows[:WORK_QUEUE_LIMIT],
        truncated=len(rows) > WORK_QUEUE_LIMIT, limit=WORK_QUEUE_LIMIT, now=now,
    )  # fmt: skip


# --- likely duplicates ---------------------------------------------------------------------------

DUPLICATES_LIMIT = 200
# Written by identity resolution on the contact an arrival joined when the arrival's phone was another's.
DUPLICATE_SUSPECTED_EVENT = "contact.duplicate_suspected"  # indexed as such (crm.models)
_GMAIL_DOMAINS = ["gmail.com", "googlemail.com"]


@dataclass(frozen=True)
class DuplicatePair:
    first: Contact  # the older one: it survives a merge
    second: Contact
    reasons: tuple[str, ...]

    @property
    def contacts(self) -> tuple[Contact, Contact]:
        return self.first, self.second


def _email_match_key():
    """The mailbox an email reaches: lower case, no "+tag", and at Gmail no dots (Gmail ignores both)."""
    email = Lower(Trim("email"))
    at = StrIndex(Concat(email, Value("@")), Value("@"))
    local, domain = Substr(email, 1, at - 1), Substr(email, at + 1)
    untagged = Substr(local, 1, StrIndex(Concat(local, Value("+")), Value("+")) - 1)
    return Case(
        When(In(domain, _GMAIL_DOMAINS), then=Concat(Replace(untagged, Value("."), Value("")), Value("@gmail.com"))),
        default=Concat(untagged, Value("@"), domain),
        output_field=CharField(),
    )


def _phone_match_key():
    """The phone's digits: the same number however it was written."""
    key = F("phone")
    for mark in ("+", " ", "-", ".", "(", ")"):
        key = Replace(key, Value(mark), Value(""))
    return key


def _name_match_key():
    parts = [Lower(Trim(name)) for name in ("first_name", "last_name", "company")]
    return Concat(parts[0], Value("|"), parts[1], Value("|"), parts[2], output_field=CharField())


# Each rule: what staff read, the contacts it applies to, and the key two contacts of one store share.
_DUPLICATE_RULES = (
    ("same email", ~Q(email=""), _email_match_key),
    ("same phone", ~Q(phone=""), _phone_match_key),
    ("same name and company", ~Q(first_name="") & ~Q(last_name="") & ~Q(company=""), _name_match_key),
)


def _suspected_pairs(contacts, store_ids, limit: int) -> list[tuple[Contact, Contact]]:
    """The pairs an arrival left apart (its email was one contact's, its phone another's), oldest first.

    Each is recorded as DUPLICATE_SUSPECTED_EVENT on the contact the arrival joined, naming the other; a
    pair whose other contact is gone (merged since) is no longer listed.
    """
    events = _in_stores(TimelineEvent.objects.filter(event_type=DUPLICATE_SUSPECTED_EVENT), store_ids)
    named = list(events.order_by("-occurred_at").values_list("contact_id", "entity_id")[:limit])
    ids = {contact_id for contact_id, _ in named} | {int(other) for _, other in named if other.isdigit()}
    by_id = contacts.in_bulk(ids)
    pairs = []
    for contact_id, other in named:
        a, b = by_id.get(contact_id), by_id.get(int(other) if other.isdigit() else None)
        if a is not None and b is not None and a.pk != b.pk and a.store_id == b.store_id:
            pairs.append(tuple(sorted((a, b), key=lambda contact: (contact.created_at, contact.pk))))
    return pairs


def contact_duplicates(*, store_ids, limit: int = DUPLICATES_LIMIT) -> list[DuplicatePair]:
    """Pairs of contacts of one store (or both of the shared pool) that are likely one person, newest first.

    Never across stores: a key is shared within (store, key). Each group of contacts sharing a key pairs its
    oldest with each of the others, so merging the pairs one by one leaves one contact. Two queries per rule
    over the visible contacts; at most `limit` pairs.
    """
    contacts = _in_stores(Contact.objects.select_related("store"), store_ids)
    found: dict[tuple[int, int], tuple[Contact, Contact, dict[str, None]]] = {}  # reasons as an ordered set
    for reason, applies, key in _DUPLICATE_RULES:
        keyed = contacts.filter(applies).annotate(match_key=key())
        # The shared keys first, a narrow aggregate, then their contacts: a window over whole rows would sort
        # every row of the visible stores (several times slower on a large table).
        shared = keyed.values("store_id", "match_key").annotate(size=Count("pk"), latest=Max("created_at"))
        groups = {
            (group["store_id"], group["match_key"]) for group in shared.filter(size__gt=1).order_by("-latest")[:limit]
        }
        members = keyed.filter(match_key__in={match_key for _, match_key in groups})
        members = members.order_by("store_id", "match_key", "created_at", "pk")[: limit * 10] if groups else []
        for group, grouped in groupby(members, key=lambda contact: (contact.store_id, contact.match_key)):
            if group not in groups:
                continue  # the same key at another store
            oldest, *others = grouped
            for contact in others:
                found.setdefault((oldest.pk, contact.pk), (oldest, contact, {}))[2][reason] = None
    for a, b in _suspected_pairs(contacts, store_ids, limit):
        found.setdefault((a.pk, b.pk), (a, b, {}))[2]["email of one, phone of the other"] = None
    pairs = [DuplicatePair(first=a, second=b, reasons=tuple(reasons)) for a, b, reasons in found.values()]
    pairs.sort(key=lambda pair: (pair.second.created_at, pair.second.pk), reverse=True)
    return pairs[:limit]


# --- data-subject requests (privacy/) ------------------------------------------------------------


def subject_contacts(*, emails, phones, lead_ids) -> dict[str, list[dict]]:
    """The contacts of the person, whole: known by one of the emails or phones, or the contact of a task one
    of the leads opened. {model label: rows}."""
    opened = Task.objects.filter(source_lead__in=lead_ids).values("contact_id")
    known = Q(email__in=emails) | Q(phone__in=phones) | Q(pk__in=opened)
    return {Contact._meta.label: list(Contact.objects.filter(known).order_by("pk").values())}


def subject_rows(*, contact_ids, lead_ids, timeline: bool = True) -> dict[str, list[dict]]:
    """The tasks (of the contacts, or opened by the leads) and, with `timeline`, the contacts' timelines, whole,
    in time order (an erasure needs no timeline: it goes with its contact). {model label: rows}."""
    tasks = Task.objects.filter(Q(contact__in=contact_ids) | Q(source_lead__in=lead_ids)).order_by("created_at")
    rows = {Task._meta.label: list(tasks.values())}
    if timeline:
        events = TimelineEvent.objects.filter(contact__in=contact_ids).order_by("occurred_at", "pk")
        rows[TimelineEvent._meta.label] = list(events.values())
    return rows
