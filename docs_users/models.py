from django.db import models


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
        # The table (and its index) kept the names they had in the tracking app.
        db_table = "tracking_trackeduser"
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
