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


class TrackedUser(models.Model):
    """A signed-in user of the docs site or the MCP server, keyed by the identity provider's `sub`.

    Everything captured about the user lives on this one row, so deleting it
    (retention) deletes all of it. The capped lists and counters are JSON
    because they are read and delivered whole and never queried inside.
    """

    class Channel(models.TextChoices):
        MCP = "mcp", "MCP server"
        DOCS_LOGIN = "docs-login", "Docs login"

    sub = models.CharField("subject", max_length=255, unique=True, help_text="The identity provider's user id.")
    email = models.EmailField(blank=True)
    given_name = models.CharField(max_length=150, blank=True)
    family_name = models.CharField(max_length=150, blank=True)
    company = models.CharField(max_length=200, blank=True, help_text="Organization name, else from the email domain.")
    signed_up_at = models.DateTimeField(null=True, blank=True)
    last_sign_in_at = models.DateTimeField(null=True, blank=True)
    last_channel = models.CharField(max_length=16, choices=Channel.choices, blank=True)
    mcp_client = models.CharField("MCP client", max_length=100, blank=True)
    # Genuine activity only (sign-ins and captures): the retention clock. Sync and delivery never touch it.
    last_activity_at = models.DateTimeField(db_index=True)
    # Set by every capture, cleared by the daily sync once the profile is queued for delivery.
    pending_since = models.DateTimeField(null=True, blank=True)

    mcp_tool_counts = models.JSONField(default=dict, blank=True)
    mcp_last_tool_at = models.DateTimeField(null=True, blank=True)
    mcp_agent_intents = models.JSONField(default=list, blank=True)  # newest first: {tool, context, at}

    docs_recent_pages = models.JSONField(default=list, blank=True)  # newest first
    docs_page_counts = models.JSONField(default=dict, blank=True)
    docs_product_areas = models.JSONField(default=dict, blank=True)
    docs_getting_started_visits = models.PositiveIntegerField(default=0)
    docs_search_terms = models.JSONField(default=list, blank=True)  # newest first
    docs_last_active_at = models.DateTimeField(null=True, blank=True)

    kapa_thread_count = models.PositiveIntegerField(null=True, blank=True)
    kapa_last_interaction_at = models.DateTimeField(null=True, blank=True)
    kapa_questions = models.JSONField(default=list, blank=True)
    kapa_competitor_mentions = models.JSONField(default=dict, blank=True)
    kapa_refreshed_at = models.DateTimeField(null=True, blank=True)
    # Questions asked through the MCP server's ask_docs: Kapa files those threads apart from the widget's, where
    # the engagement fetch cannot see them, so they are recorded here and merged into the kapa_* fields by the sync.
    kapa_asked_thread_count = models.PositiveIntegerField("threads asked through MCP", default=0)
    kapa_asked_questions = models.JSONField(default=list, blank=True)  # newest first, capped: {thread_id, question, at}

    last_delivered_at = models.DateTimeField(null=True, blank=True)
    last_delivered_payload = models.JSONField(null=True, blank=True, help_text="As sent, redacted.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-last_activity_at"]
        permissions = [("deliver_trackeduser", "Can deliver tracked users to the CRM now")]
        indexes = [
            # Only pending rows are in it, so the daily sync's scan costs what the day's actives do.
            models.Index(
                fields=["pending_since", "id"],
                name="tracking_user_pending_idx",
                condition=models.Q(pending_since__isnull=False),
            ),
        ]

    def __str__(self):
        return self.email or self.sub

    @property
    def is_pending(self) -> bool:
        return self.pending_since is not None
