"""Contacts, outreach tasks with an SLA and an owner, each contact's timeline, and who sells when.

A contact is one person at one store, known by a normalized email, an E.164
phone, or both: the store is the isolation key, so the same person at two
stores is two contacts; leads of no store share one pool (store empty).
"""

import uuid
from datetime import time

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

    phone = models.CharField(max_length=32, blank=True, help_text="E.164; empty when only the email is known.")
    email = models.CharField(
        max_length=254, blank=True, help_text="Normalized (lower case); empty when only the phone is known."
    )
    company = models.CharField(max_length=200, blank=True)
    store = models.ForeignKey(
        "stores.Store", null=True, blank=True, on_delete=models.PROTECT, related_name="contacts",
        help_text="Empty: the shared pool of leads of no store.",
    )  # fmt: skip
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
        # One contact per email and per phone within a store, and within the shared pool (NULLs not distinct).
        constraints = [
            models.UniqueConstraint(
                fields=["store", "phone"], condition=~Q(phone=""), nulls_distinct=False, name="uq_contacts_store_phone"
            ),
            models.UniqueConstraint(
                fields=["store", "email"], condition=~Q(email=""), nulls_distinct=False, name="uq_contacts_store_email"
            ),
            models.CheckConstraint(condition=~Q(phone="", email=""), name="ck_contacts_known_by_something"),
        ]

    def __str__(self):
        return self.full_name or self.email or self.phone

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
    store = models.ForeignKey(
        "stores.Store", null=True, blank=True, on_delete=models.PROTECT, related_name="tasks",
        help_text="The contact's store; empty for the shared pool.",
    )  # fmt: skip
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
    escalated_at = models.DateTimeField(
        null=True, blank=True, help_text="When the owner's manager was alerted that it passed its due time."
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
    store = models.ForeignKey(
        "stores.Store", null=True, blank=True, on_delete=models.PROTECT, related_name="timeline_events"
    )
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
        indexes = [
            # The duplicates list reads the pairs identity resolution left apart: a few rows of a large table.
            models.Index(
                fields=["-occurred_at"], condition=Q(event_type="contact.duplicate_suspected"),
                name="crm_timeline_dup_suspect_idx",
            ),
        ]  # fmt: skip

    def __str__(self):
        return f"{self.event_type} at {self.occurred_at:%Y-%m-%d %H:%M}"


class RepProfile(models.Model):
    """When a sales rep takes new leads: working hours, an away switch and a cap of open tasks.

    Round-robin assignment (crm.assignment) offers a new lead to the reps of its store who are on shift,
    not away and under their cap, the one assigned longest ago first.
    """

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="rep_profile")
    manager = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="reports",
        help_text="Alerted when a task of this rep passes its due time without a response.",
    )  # fmt: skip
    timezone = models.CharField(max_length=64, default="America/New_York")
    work_days = models.JSONField(default=list, blank=True, help_text="ISO weekdays worked, 1 = Monday … 7 = Sunday.")
    work_start = models.TimeField(default=time(9, 0))
    work_end = models.TimeField(default=time(17, 0))
    is_away = models.BooleanField(default=False, help_text="Away: takes no new leads whatever the hours.")
    max_open_tasks = models.PositiveIntegerField(default=25, help_text="Takes no new lead while this many are open.")
    last_assigned_at = models.DateTimeField(null=True, blank=True, help_text="When round-robin last chose this rep.")

    def __str__(self):
        return f"{self.user} (rep)"


class AssignmentRule(models.Model):
    """A named owner for new leads of a service type and/or a source channel, before round-robin."""

    store = models.ForeignKey(
        "stores.Store", null=True, blank=True, on_delete=models.CASCADE, related_name="assignment_rules",
        help_text="Empty: leads of no store.",
    )  # fmt: skip
    service_type = models.CharField(max_length=32, blank=True, help_text="Empty: any.")
    channel = models.CharField(max_length=16, blank=True, help_text="Empty: any.")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="assignment_rules")
    priority = models.PositiveIntegerField(default=100, help_text="Lower first.")
    is_active = models.BooleanField(default=True)

    class Meta:
        ordering = ["priority", "pk"]

    def __str__(self):
        return f"{self.service_type or 'any service'} / {self.channel or 'any channel'} → {self.owner}"
