import re

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from integrations.imap.client import endpoint_allowed
from leadgen.models import Lead

# The mailbox configured by IMAP_* environment variables goes by this name.
ENV_MAILBOX_NAME = "env"
# Admin mailboxes may only name variables with this prefix: no row can point a login at SECRET_KEY & co.
PASSWORD_ENV_PREFIX = "IMAP_PASSWORD_"
ENV_VAR_NAME = re.compile(re.escape(PASSWORD_ENV_PREFIX) + r"[A-Z0-9_]+")


def validate_env_var_name(value):
    if not ENV_VAR_NAME.fullmatch(value):
        raise ValidationError(
            f"Use an environment variable name starting with {PASSWORD_ENV_PREFIX}: capital letters, digits and "
            "underscores."
        )


def imap_host_allowed(host: str, port: int) -> bool:
    """Whether IMAP_ALLOWED_HOSTS lets an admin mailbox connect there (entries `host` or `host:port`)."""
    return endpoint_allowed(host, port, frozenset(entry.strip().lower() for entry in settings.IMAP_ALLOWED_HOSTS))


def validate_not_env_mailbox_name(value):
    if value == ENV_MAILBOX_NAME:
        raise ValidationError(f"{ENV_MAILBOX_NAME!r} is the mailbox configured by the IMAP_* environment variables.")


class Mailbox(models.Model):
    """An IMAP mailbox of lead-notification emails, polled every few minutes.

    The password is never stored: the row names the environment variable of
    the worker processes that holds it, always an IMAP_PASSWORD_* one, and the
    host must be one IMAP_ALLOWED_HOSTS lists, so no row can send a server
    secret, or any password, to a host of the editor's choosing. Only
    superusers set host, port and credentials (tracking/admin.py).
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
        help_text="Name of the environment variable holding the password: IMAP_PASSWORD_ and a suffix, e.g. "
        "IMAP_PASSWORD_SALES.",
    )
    folder = models.CharField(max_length=255, default="INBOX")
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name

    def clean(self):
        if self.host and self.port and not imap_host_allowed(self.host, self.port):
            raise ValidationError({"host": f"{self.host}:{self.port} is not in IMAP_ALLOWED_HOSTS."})


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
