"""Merging two contacts of one person into one: a preview of which value wins, then one atomic merge.

The older contact survives (its id stays, so every link to it keeps working).
For each field the survivor's value wins unless it is empty; staff may pick
the other contact's value field by field. The merge moves every row that
points at the other contact, keeps one pending task per type (the one due
first; the other is cancelled with a note on the timeline), deletes the other
contact and records `contact.merged` naming both ids and who merged. It runs
in one transaction with both contacts locked, so two submits of the same merge
merge once, and it is refused across stores (a store and the shared pool
included): the store is the isolation key.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

import structlog
from django.db import transaction
from django.utils import timezone

from crm.identity import identity_lock
from crm.models import Contact, Task, TimelineEvent

logger = structlog.get_logger(__name__)

CONTACT_MERGED_EVENT = "contact.merged"
TASK_CANCELLED_EVENT = "task.cancelled"
SURVIVOR, OTHER = "survivor", "other"
# The fields staff choose between; the store is equal by construction and last activity is the later one.
MERGE_FIELDS = (
    "first_name", "last_name", "email", "phone", "company", "lifecycle_stage", "lead_status", "franchise", "account_id",
)  # fmt: skip


class MergeRefused(Exception):
    """The two contacts may not be merged (as asked, or any more); the message says why, for staff."""


@dataclass(frozen=True)
class FieldChoice:
    name: str
    label: str
    survivor_value: str
    other_value: str
    source: str  # SURVIVOR or OTHER: whose value the merged contact keeps

    @property
    def value(self) -> str:
        return self.survivor_value if self.source == SURVIVOR else self.other_value

    @property
    def differs(self) -> bool:
        return self.survivor_value != self.other_value


@dataclass(frozen=True)
class MergePlan:
    survivor: Contact
    other: Contact
    fields: tuple[FieldChoice, ...]

    def values(self) -> dict[str, str]:
        return {choice.name: choice.value for choice in self.fields}

    def taken_from_other(self) -> list[str]:
        return [choice.name for choice in self.fields if choice.differs and choice.source == OTHER]


def merge_plan(*, first: Contact, second: Contact, picks: Mapping[str, str] | None = None) -> MergePlan:
    """What merging `first` and `second` would keep, field by field; MergeRefused if they may not be merged.

    `picks` maps a field name to SURVIVOR or OTHER; a field not picked keeps the survivor's value unless it
    is empty and the other's is not.
    """
    if first.pk == second.pk:
        raise MergeRefused("A contact cannot be merged with itself.")
    if first.store_id != second.store_id:
        raise MergeRefused("These contacts belong to different stores (or one to the shared pool); never merged.")
    survivor, other = sorted((first, second), key=lambda contact: (contact.created_at, contact.pk))
    picks = picks or {}
    choices = []
    for name in MERGE_FIELDS:
        ours, theirs = getattr(survivor, name), getattr(other, name)
        source = picks.get(name) or (OTHER if not ours and theirs else SURVIVOR)
        if source not in (SURVIVOR, OTHER):
            raise MergeRefused(f"Unknown choice for {name}.")
        label = str(Contact._meta.get_field(name).verbose_name)
        choices.append(FieldChoice(name=name, label=label, survivor_value=ours, other_value=theirs, source=source))
    plan = MergePlan(survivor=survivor, other=other, fields=tuple(choices))
    values = plan.values()
    if not values["email"] and not values["phone"]:
        raise MergeRefused("Keep an email or a phone: a contact is known by one of them.")
    return plan


def rows_to_move(contact: Contact) -> dict[str, int]:
    """How many rows of each model refer to `contact`: what a merge would move from it, for the preview."""
    return {
        relation.related_model._meta.label_lower: relation.related_model._base_manager.filter(
            **{relation.field.name: contact}
        ).count()
        for relation in Contact._meta.related_objects
    }


def pending_task_clash(survivor: Contact, other: Contact) -> bool:
    """Whether both have a pending task of one type, so that a merge cancels one of them."""
    pending = Task.objects.filter(status=Task.Status.PENDING)
    ours = set(pending.filter(contact=survivor).values_list("type_category", flat=True))
    return pending.filter(contact=other, type_category__in=ours).exists()


def merged_into(*, contact_id: int) -> int | None:
    """The contact that `contact_id` was merged into (and is now part of), if it was merged away."""
    merged = TimelineEvent.objects.filter(idempotency_key=_merged_event_key(contact_id))  # the unique index
    return merged.values_list("contact_id", flat=True).first()


def _merged_event_key(merged_id: int) -> str:
    return f"{CONTACT_MERGED_EVENT}:{merged_id}"  # a contact is merged away once


@dataclass(frozen=True)
class MergeResult:
    survivor_id: int
    merged_id: int
    moved: dict[str, int]  # rows moved to the survivor, per table
    cancelled_task_ids: list[str]


def contacts_merge(
    *,
    first_id: int,
    second_id: int,
    picks: Mapping[str, str] | None,
    actor,
    seen: Mapping[int, datetime] | None = None,
) -> MergeResult:
    """Merge the two contacts as `merge_plan` says, in one transaction; `actor` is the staff user.

    `seen` maps each contact's id to its `updated_at` as the preview showed it: a contact changed since
    then refuses the merge, so nobody merges values they were not shown. MergeRefused when a contact is
    gone (already merged) or changed, or the two may not be merged.
    """
    now = timezone.now()
    with transaction.atomic():
        # First the identity keys of both, as arrivals take them (crm.identity), so an arrival for this person
        # waits for the merge and then finds the survivor; then both rows in id order (two merges naming the
        # same pair cannot deadlock), so a concurrent merge of either waits and then finds its contact gone.
        keys = _identity_keys_lock([first_id, second_id])
        contacts = list(Contact.objects.select_for_update().filter(pk__in=[first_id, second_id]).order_by("pk"))
        if len(contacts) != 2:
            raise MergeRefused("One of these contacts no longer exists: it may have been merged already.")
        if {(contact.store_id, contact.email, contact.phone) for contact in contacts} != keys:
            raise MergeRefused("A contact changed meanwhile; review the merge again.")
        if seen is not None and any(contact.updated_at != seen.get(contact.pk) for contact in contacts):
            raise MergeRefused("A contact changed since the preview; review the merge again.")
        plan = merge_plan(first=contacts[0], second=contacts[1], picks=picks)
        survivor, other, merged_id = plan.survivor, plan.other, plan.other.pk
        cancelled = _pending_tasks_deduplicate(survivor, other, actor=actor, now=now)
        moved = _related_rows_move(survivor, other)
        other_activity = other.last_activity_at
        # The other row goes first: the survivor may take its email or phone, each unique in the store.
        Contact.objects.filter(pk=merged_id).delete()
        for name, value in plan.values().items():
            setattr(survivor, name, value)
        if other_activity and (survivor.last_activity_at is None or other_activity > survivor.last_activity_at):
            survivor.last_activity_at = other_activity
        survivor.save()
        TimelineEvent.objects.create(
            contact=survivor, store_id=survivor.store_id, franchise=survivor.franchise,
            account_id=survivor.account_id, event_type=CONTACT_MERGED_EVENT, event_category="contact",
            entity_type="contact", entity_id=str(merged_id), occurred_at=now, actor_type="staff",
            # Ids and field names only: the merged contact's values would outlive an erasure of this one.
            new_value={
                "survivor_id": survivor.pk, "merged_id": merged_id, "by": actor.get_username(),
                "by_id": actor.pk, "taken_from_merged": plan.taken_from_other(), "moved": moved,
                "cancelled_tasks": cancelled,
            },
            idempotency_key=_merged_event_key(merged_id),
        )  # fmt: skip
    result = MergeResult(survivor_id=survivor.pk, merged_id=merged_id, moved=moved, cancelled_task_ids=cancelled)
    logger.info("contacts_merged", survivor_id=result.survivor_id, merged_id=result.merged_id, actor_id=actor.pk)
    return result


def _identity_keys_lock(contact_ids: list[int]) -> set[tuple]:
    """Take the identity locks of the contacts' emails and phones; returns (store, email, phone) of each as read.

    Read before the rows are locked (the locks come first, in the order arrivals take them), so the caller
    checks the locked rows still have these keys. Contacts of two stores are never merged: nothing to lock.
    """
    keys = set(Contact.objects.filter(pk__in=contact_ids).values_list("store_id", "email", "phone"))
    if len({store_id for store_id, _, _ in keys}) == 1:
        store_id = next(iter(keys))[0]
        identity_lock(store_id=store_id, emails=[key[1] for key in keys], phones=[key[2] for key in keys])
    return keys


def _pending_tasks_deduplicate(survivor: Contact, other: Contact, *, actor, now) -> list[str]:
    """One pending task per contact and type: where both have one, the one due first stays, the other is
    cancelled, with a note on the survivor's timeline naming the task that covers it."""
    pending = Task.objects.select_for_update().filter(contact__in=[survivor, other], status=Task.Status.PENDING)
    kept: dict[str, Task] = {}
    cancelled = []
    for task in pending.order_by("due_at", "pk"):
        keeper = kept.setdefault(task.type_category, task)
        if keeper is task:
            continue
        task.status, task.action_needed = Task.Status.CANCELLED, False
        task.save(update_fields=["status", "action_needed", "updated_at"])
        TimelineEvent.objects.create(
            contact=survivor, store_id=task.store_id, franchise=task.franchise, account_id=task.account_id,
            event_type=TASK_CANCELLED_EVENT, event_category="task", entity_type="task", entity_id=str(task.pk),
            occurred_at=now, actor_type="staff",
            new_value={"by": actor.get_username(), "reason": "contacts merged", "covered_by": str(keeper.pk),
                       "merged_id": other.pk},
            idempotency_key=f"{TASK_CANCELLED_EVENT}:{task.pk}",
        )  # fmt: skip
        cancelled.append(str(task.pk))
    return cancelled


def _related_rows_move(survivor: Contact, other: Contact) -> dict[str, int]:
    """Point every row that refers to `other` at `survivor`, whatever model it is in.

    Read from the model graph rather than listed, so a model that gains a foreign key to Contact is moved
    too instead of being cascaded away with the merged contact.
    """
    moved = {}
    for relation in Contact._meta.related_objects:
        model, field = relation.related_model, relation.field.name
        count = model._base_manager.filter(**{field: other}).update(**{field: survivor})
        moved[model._meta.label_lower] = count
    return moved
