import re
import uuid
from datetime import time
from zoneinfo import ZoneInfo, available_timezones

from django.core.exceptions import ValidationError
from django.db import models

from leadgen.models import Lead

# The mailbox configured by IMAP_* environment variables goes by this name.
ENV_MAILBOX_NAME = "env"
ENV_VAR_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")


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
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["franchise", "name"]

    def __str__(self):
        return f"{self.franchise} — {self.name}"

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)


def validate_env_var_name(value):
    if not ENV_VAR_NAME.fullmatch(value):
        raise ValidationError("Use an environment variable name: capital letters, digits and underscores.")


def validate_not_env_mailbox_name(value):
    if value == ENV_MAILBOX_NAME:
        raise ValidationError(f"{ENV_MAILBOX_NAME!r} is the mailbox configured by the IMAP_* environment variables.")


class Mailbox(models.Model):
    """An IMAP mailbox of lead-notification emails, polled every few minutes.

    The password is never stored: the row names the environment variable of
    the worker processes that holds it.
    """

    name = models.SlugField(max_length=50, unique=True, validators=[validate_not_env_mailbox_name])
    host = models.CharField(max_length=255)
    port = models.PositiveIntegerField(default=993)
    use_ssl = models.BooleanField(
        "implicit TLS", default=True, help_text="Off: STARTTLS on a plain port (usually 143). Plaintext is never used."
    )
    username = models.CharField(max_length=255)
    password_env_var = models.CharField(
        "password environment variable",
        max_length=100,
        validators=[validate_env_var_name],
        help_text="Name of the environment variable holding the password, e.g. IMAP_PASSWORD_SALES.",
    )
    folder = models.CharField(max_length=255, default="INBOX")
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name


class EmailLeadManager(models.Manager):
    def get_queryset(self):
        return super().get_queryset().filter(channel=Lead.Channel.EMAIL)


class EmailLead(Lead):
    """Leads captured from lead-notification emails, as the admin shows them (with their parse state)."""

    objects = EmailLeadManager()

    class Meta:
        proxy = True
        ordering = ["-received_at"]
        verbose_name = "email lead"
