"""Franchise stores and the staff assigned to them.

The store is the isolation key for every lead, contact, task and timeline
event downstream. This app sits below the domain apps (leadgen, tracking,
crm import it; it imports none of them).
"""

import uuid
from datetime import time
from zoneinfo import ZoneInfo, available_timezones

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

# The one permission that lifts store scoping (stores.scoping); superusers hold it implicitly.
VIEW_ALL_STORES = "view_all_stores"


def validate_timezone(value):
    if value not in available_timezones():
        raise ValidationError(f"{value!r} is not a known IANA time zone.")


class Store(models.Model):
    """A franchise location; the isolation key for every lead, contact and task downstream."""

    franchise = models.CharField(max_length=120, help_text="Franchise or brand.")
    name = models.CharField(max_length=200)
    account_id = models.CharField(max_length=64, db_index=True)
    store_uuid = models.UUIDField(default=uuid.uuid4, unique=True)
    lead_email = models.EmailField(
        unique=True, null=True, blank=True, help_text="Address lead notifications are sent to."
    )
    tracking_id = models.CharField(
        max_length=64, unique=True, null=True, blank=True, help_text="The ID in lead-tracking+{ID}@…"
    )
    timezone = models.CharField(max_length=64, default="America/New_York", validators=[validate_timezone])
    quiet_hours_start = models.TimeField(default=time(21, 0))
    quiet_hours_end = models.TimeField(default=time(8, 0))
    is_active = models.BooleanField(default=True)
    reassign_overdue = models.BooleanField(
        default=False, help_text="A task past its due time without a response goes to the next rep on shift."
    )
    # Staff see only the rows of the stores they are assigned to (stores.scoping).
    staff = models.ManyToManyField(
        settings.AUTH_USER_MODEL,
        blank=True,
        related_name="stores",
        db_table="stores_store_staff",
        help_text="Staff who work this store. Staff see only their stores' rows; seeing every store is the "
        "“Can see every store” permission (the Managers group).",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "tracking_store"  # the table predates this app; the name stays so no data moves
        ordering = ["franchise", "name"]
        permissions = [(VIEW_ALL_STORES, "Can see every store")]

    def __str__(self):
        return f"{self.franchise} — {self.name}"

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)
