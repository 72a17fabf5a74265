"""Contacts, outreach tasks with an SLA, and each contact's timeline.

A contact is one phone number at one store: the store is the isolation key,
so the same person calling two stores is two contacts.
"""

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone


class Contact(models.Model):
    class LifecycleStage(models.TextChoices):
        LEAD = "lead"
        PROSPECT = "prospect"
        CUSTOMER = "customer"

    class LeadStatus(models.TextChoices):
        NEW = "new"
        ATTEMPTED = "attempted"
        CONNECTED = "connected"
        QUALIFIED = "qualified"
        UNQUALIFIED = "unqualified"

    phone = models.CharField(max_length=32, help_text="E.164")
    store = models.ForeignKey("stores.Store", on_delete=models.PROTECT, related_name="contacts")
    franchise = models.CharField(max_length=120, blank=True)
    account_id = models.CharField(max_length=64, blank=True, help_text="Audit only; the store isolates.")
    lifecycle_stage = models.CharField(max_length=16, choices=LifecycleStage.choices, default=LifecycleStage.LEAD)
    lead_status = models.CharField(max_length=16, choices=LeadStatus.choices, default=LeadStatus.NEW)
    first_name = models.CharField(max_length=100, blank=True)
    last_name = models.CharField(max_length=100, blank=True)
    last_activity_at = models.DateTimeField(null=True, blank=True, db_index=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-last_activity_at"]
        constraints = [models.UniqueConstraint(fields=["phone", "store"], name="uq_contacts_phone_store")]

    def __str__(self):
        return self.full_name or self.phone

    @property
    def full_name(self) -> str:
        """First and last name as known; empty when neither is."""
        return f"{self.first_name} {self.last_name}".strip()


class Task(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending"
        DONE = "done"
        CANCELLED = "cancelled"

    class Priority(models.TextChoices):
        HIGH = "high"
        NORMAL = "normal"
        LOW = "low"

    class TaskType(models.TextChoices):
        LEAD_OUTREACH = "lead_outreach", "Lead outreach"

    class SourceType(models.TextChoices):
        LEAD = "lead"
        STAFF = "staff"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    contact = models.ForeignKey(Contact, on_delete=models.CASCADE, related_name="tasks")
    store = models.ForeignKey("stores.Store", on_delete=models.PROTECT, related_name="tasks")
    franchise = models.CharField(max_length=120, blank=True)
    account_id = models.CharField(max_length=64, blank=True)
    task_type = models.CharField(max_length=32, choices=TaskType.choices)
    type_category = models.CharField(max_length=32, choices=TaskType.choices)
    source_type = models.CharField(max_length=16, choices=SourceType.choices, default=SourceType.STAFF)
    source_lead = models.ForeignKey(
        "leadgen.Lead", null=True, blank=True, on_delete=models.PROTECT, related_name="crm_tasks"
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    priority = models.CharField(max_length=8, choices=Priority.choices, default=Priority.NORMAL)
    action_needed = models.BooleanField(default=True)
    action_needed_reason = models.CharField(max_length=300, blank=True)
    suggested_actions = models.JSONField(default=list, blank=True)
    due_at = models.DateTimeField(db_index=True)
    assigned_to = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="crm_tasks",
        help_text="Empty: anyone at the store may take it.",
    )
    completed_at = models.DateTimeField(null=True, blank=True)
    completed_by = models.CharField(max_length=150, blank=True)
    # Copied from the source lead when the task is created, so the dashboard's first-response and
    # contacted figures read the task table alone (no join to the leads on every load).
    arrived_at = models.DateTimeField(
        default=timezone.now,
        help_text="When the lead arrived (received, else recorded); a task staff created: its creation. "
        "First response is measured from here.",
    )
    lead_recorded_at = models.DateTimeField(
        null=True, blank=True, help_text="When the source lead was recorded; empty for a task staff created."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["due_at"]
        indexes = [
            # The funnel's contacted step: done tasks by their lead's recording time (and store), index only.
            models.Index(
                fields=["lead_recorded_at", "store"], condition=Q(status="done"), name="crm_task_done_lead_idx"
            ),
        ]
        constraints = [
            # A retried LeadCreated never creates a second task for the same lead.
            models.UniqueConstraint(fields=["source_lead"], name="uq_tasks_source_lead"),
            # Nobody gets two pending outreach tasks at once: the one pending already covers a new lead.
            models.UniqueConstraint(
                fields=["contact", "type_category"],
                condition=Q(status="pending"),
                name="uq_tasks_pending_contact_category",
                violation_error_message="This contact already has a pending task of this type.",
            ),
        ]

    def __str__(self):
        return f"{self.get_task_type_display()} — {self.contact}"

    @property
    def is_overdue(self) -> bool:
        return self.status == self.Status.PENDING and self.due_at < timezone.now()


class TimelineEvent(models.Model):
    """Something that happened to a contact; append-only, deduplicated by its idempotency key."""

    contact = models.ForeignKey(Contact, on_delete=models.CASCADE, related_name="timeline")
    store = models.ForeignKey("stores.Store", on_delete=models.PROTECT, related_name="timeline_events")
    franchise = models.CharField(max_length=120, blank=True)
    account_id = models.CharField(max_length=64, blank=True)
    event_type = models.CharField(max_length=64)
    event_category = models.CharField(max_length=32)
    entity_type = models.CharField(max_length=32, blank=True)
    entity_id = models.CharField(max_length=64, blank=True)
    occurred_at = models.DateTimeField(db_index=True, help_text="When it happened at the source, not when recorded.")
    actor_type = models.CharField(max_length=32, blank=True)
    new_value = models.JSONField(default=dict, blank=True)
    idempotency_key = models.CharField(max_length=200, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-occurred_at"]

    def __str__(self):
        return f"{self.event_type} at {self.occurred_at:%Y-%m-%d %H:%M}"
