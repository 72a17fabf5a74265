"""Reads of prototypes: by the lead's public id, the event log after a number, the stuck ones."""

import uuid
from datetime import datetime

from django.core.exceptions import ValidationError
from django.db import connection
from django.db.models import Count, F, Q

import jobs
from prototypes.models import Prototype, PrototypeEvent


def prototype_for_public_lead(*, public_id) -> Prototype | None:
    """The prototype of the lead a public URL names; None for an unknown lead or one without a prototype."""
    try:
        return Prototype.objects.select_related("lead").filter(lead__public_id=public_id).first()
    except (ValueError, ValidationError):
        return None


def prototypes_for_public_leads(*, public_ids: list[str]) -> dict[uuid.UUID, Prototype]:
    """The prototypes of the leads these public ids name, in one query, by public id (without their leads:
    for the progress stream, which opens a thousand at once); ids that are not UUIDs find nothing."""
    wanted = set()
    for public_id in public_ids:
        try:
            wanted.add(uuid.UUID(str(public_id)))
        except ValueError:
            continue
    found = Prototype.objects.filter(lead__public_id__in=wanted).annotate(lead_public_id=F("lead__public_id"))
    return {prototype.lead_public_id: prototype for prototype in found}


def prototypes_events_after(*, after: list[tuple[int, int]], limit: int = 500) -> list[list[PrototypeEvent]]:
    """For each `(prototype_id, number)`, the prototype's events after that number, in order, at most
    `limit`; one query for all (the progress streams' log reads, a thousand when a thousand pages open)."""
    lowest: dict[int, int] = {}  # one read per prototype (two tabs of one page ask for it twice)
    for pk, number in after:
        lowest[pk] = min(number, lowest.get(pk, number))
    table = connection.ops.quote_name(PrototypeEvent._meta.db_table)
    logged = PrototypeEvent.objects.raw(
        f"SELECT e.* FROM unnest(%s::bigint[], %s::int[]) AS w(id, after)"
        f" CROSS JOIN LATERAL (SELECT * FROM {table} WHERE prototype_id = w.id AND number > w.after"
        " ORDER BY number LIMIT %s) e ORDER BY e.prototype_id, e.number",
        [list(lowest), list(lowest.values()), limit],
    )
    by_prototype: dict[int, list[PrototypeEvent]] = {}
    for event in logged:
        by_prototype.setdefault(event.prototype_id, []).append(event)
    return [[event for event in by_prototype.get(pk, []) if event.number > number][:limit] for pk, number in after]


def prototype_failure_message(*, prototype: Prototype) -> str:
    """What the visitor was told when it failed (the last error event), else nothing."""
    if prototype.state != Prototype.State.FAILED:
        return ""
    errors = PrototypeEvent.objects.filter(prototype=prototype, kind=PrototypeEvent.Kind.ERROR)
    event = errors.order_by("-number").first()
    return event.data.get("message", "") if event else ""


def check_key(prototype_id: int, number: int) -> str:
    return f"prototypes.check:{prototype_id}:{number}"


def prototypes_without_pending_check(*, since: datetime) -> list[Prototype]:
    """Unfinished prototypes created since `since` whose latest scheduled check is not waiting or running."""
    unfinished = list(
        Prototype.objects.filter(created_at__gte=since).exclude(state__in=Prototype.TERMINAL).order_by("pk")
    )
    waiting = jobs.keys_in_progress([check_key(p.pk, p.checks) for p in unfinished])
    return [p for p in unfinished if check_key(p.pk, p.checks) not in waiting]


def prototypes_requested_counts(*, start, end, store_ids=None) -> dict:
    """Prototypes created in [start, end), by where they stand now: {requested, completed, failed, in_progress}.

    A prototype is created in its lead's transaction, so these are the prototypes of the leads recorded in
    the period (to the millisecond at the period's edges), read without joining the leads. With `store_ids`,
    only those of leads of these stores.
    """
    prototypes = Prototype.objects.filter(created_at__gte=start, created_at__lt=end)
    if store_ids is not None:
        prototypes = prototypes.filter(lead__store__in=store_ids)
    return prototypes.aggregate(
        requested=Count("pk"),
        completed=Count("pk", filter=Q(state=Prototype.State.COMPLETED)),
        failed=Count("pk", filter=Q(state=Prototype.State.FAILED)),
        in_progress=Count("pk", filter=~Q(state__in=Prototype.TERMINAL)),
    )


def prototypes_of_leads(*, lead_ids) -> list[Prototype]:
    """The prototypes of these leads (at most one each), oldest first, for a contact's page."""
    return list(Prototype.objects.filter(lead_id__in=lead_ids).order_by("created_at"))


# --- data-subject requests (privacy/) ------------------------------------------------------------


def subject_rows(*, lead_ids) -> dict[str, list[dict]]:
    """The prototypes of the leads and their event logs, whole. {model label: rows}."""
    prototypes = Prototype.objects.filter(lead__in=lead_ids).order_by("pk")
    events = PrototypeEvent.objects.filter(prototype__lead__in=lead_ids).order_by("prototype_id", "number")
    return {Prototype._meta.label: list(prototypes.values()), PrototypeEvent._meta.label: list(events.values())}
