import uuid

from django.db import models


def lead_job_key(kind: str, lead_id) -> str:
    """Lead.job_key's, for an id that may not be known yet (jobs.ROW_ID)."""
    return f"{kind}:{lead_id}"


class Lead(models.Model):
    """An inbound lead from any channel (web form, lead-notification email…)."""

    class Channel(models.TextChoices):
        WEB_FORM = "web_form", "Web form"
        EMAIL = "email"
        # Inbound lead sources (sources/): leads a platform sends by signed webhook.
        FACEBOOK = "facebook", "Facebook Lead Ads"
        GOOGLE_ADS = "google_ads", "Google Ads"
        TYPEFORM = "typeform", "Typeform"
        WEBFLOW = "webflow", "Webflow"
        WEBHOOK = "webhook", "Webhook"

    class Status(models.TextChoices):
        LEAD = "lead"
        SPAM = "spam"
        VENDOR = "vendor"

    class ServiceType(models.TextChoices):
        DIAGNOSTIC = "diagnostic"
        STRATEGIC_ADVICE = "strategic_advice", "Strategic advice"
        DEDICATED_TEAM = "dedicated_team", "Dedicated team"
        TECHNOLOGY_STRATEGY = "technology_strategy", "Technology strategy"
        PROCESS_AUTOMATION = "process_automation", "Process automation"

    class Classifier(models.TextChoices):
        LLM = "llm"
        RULES = "rules"
        STAFF = "staff"

    class PipedriveState(models.TextChoices):
        NOT_SENT = "not_sent", "Not sent"
        PENDING = "pending"
        SYNCED = "synced"
        FAILED = "failed"
        SKIPPED = "skipped"

    class ParseState(models.TextChoices):
        PARSED = "parsed"
        FAILED = "failed"

    public_id = models.UUIDField(
        default=uuid.uuid4, unique=True, editable=False, help_text="The lead's id in public URLs and API answers."
    )
    channel = models.CharField(max_length=16, choices=Channel.choices, default=Channel.WEB_FORM)
    first_name = models.CharField(max_length=100, blank=True)
    last_name = models.CharField(max_length=100, blank=True)
    email = models.EmailField(max_length=254, blank=True, db_index=True)
    phone = models.CharField(max_length=32, blank=True)
    company = models.CharField(max_length=200, blank=True)
    message = models.TextField(blank=True)
    service_type = models.CharField(max_length=32, choices=ServiceType.choices, blank=True)
    steps = models.JSONField(default=dict, blank=True, help_text="The form's step answers.")
    source_page = models.URLField(max_length=500, blank=True)
    utm = models.JSONField(default=dict, blank=True)
    client_ip = models.GenericIPAddressField(null=True, blank=True)
    store = models.ForeignKey("stores.Store", null=True, blank=True, on_delete=models.PROTECT)
    consent_text = models.TextField(blank=True, help_text="The consent the person agreed to, as shown to them.")
    consent_version = models.CharField(max_length=32, blank=True)
    consented_at = models.DateTimeField(null=True, blank=True)
    is_test = models.BooleanField(
        default=False, help_text="Sent by a platform's testing tool: kept and marked, never delivered."
    )

    status = models.CharField(max_length=10, choices=Status.choices, default=Status.LEAD)
    category = models.CharField(max_length=10, choices=Status.choices, blank=True)
    confidence = models.FloatField(null=True, blank=True)
    reasoning = models.TextField(blank=True)
    classified_by = models.CharField(max_length=10, choices=Classifier.choices, blank=True)

    pipedrive_state = models.CharField(max_length=10, choices=PipedriveState.choices, default=PipedriveState.NOT_SENT)
    pipedrive_person_id = models.PositiveBigIntegerField(null=True, blank=True)
    pipedrive_org_id = models.PositiveBigIntegerField(null=True, blank=True)
    pipedrive_lead_id = models.CharField(max_length=64, blank=True)
    clickup_task_id = models.CharField(
        max_length=64, blank=True, help_text="The sales alert's ClickUp task, once created: it is not created again."
    )
    clickup_create_started_at = models.DateTimeField(
        null=True, blank=True, help_text="When the sales alert's last create call started (a retry looks around it)."
    )
    pipedrive_cc_email = models.EmailField(
        blank=True, help_text="The lead's Smart BCC address: our emails copied there are logged on it."
    )
    preview_url = models.URLField(max_length=500, blank=True)

    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)

    # --- Lead-notification emails (channel email; tracking/ writes these) ---
    dedup_key = models.CharField(
        max_length=400,
        unique=True,
        null=True,
        blank=True,
        help_text="{sender}#{phone}#{date}, or {sender}#{receivedAt} without a phone: one lead per key.",
    )
    lead_type = models.CharField(max_length=100, blank=True, help_text="Web Lead, Online Intro…")
    booked_date = models.DateField(null=True, blank=True)
    booked_time = models.TimeField(null=True, blank=True)
    email_subject = models.CharField(max_length=998, blank=True)
    email_from = models.CharField(max_length=254, blank=True, help_text="Sender: the store's lead address.")
    email_recipient = models.CharField(max_length=254, blank=True)
    tracking_id = models.CharField(max_length=64, blank=True, help_text="From lead-tracking+{ID}@…")
    franchise = models.CharField(max_length=120, blank=True, help_text="Brand, from the store mapping.")
    account_id = models.CharField(max_length=64, blank=True, help_text="From the store mapping.")
    raw_body = models.TextField(blank=True)
    is_forwarded = models.BooleanField(default=False)
    forwarded_original_from = models.CharField(max_length=254, blank=True)
    forwarded_original_to = models.CharField(max_length=254, blank=True)
    forwarded_original_date = models.CharField(
        max_length=200, blank=True, help_text="As the forwarding mail client wrote it."
    )
    received_at = models.DateTimeField(null=True, blank=True, db_index=True)
    synced_at = models.DateTimeField(null=True, blank=True, help_text="Last time a poll wrote this lead.")
    parse_state = models.CharField(max_length=10, choices=ParseState.choices, blank=True)
    parse_error = models.TextField(blank=True)
    processed_by = models.CharField(max_length=32, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return f"{self.full_name or 'Lead'} ({self.get_channel_display()}, #{self.pk})"

    @property
    def full_name(self) -> str:
        """First and last name as given; empty when neither is known."""
        return f"{self.first_name} {self.last_name}".strip()

    def job_key(self, kind: str) -> str:
        """The idempotency key of this lead's job of `kind`: one such job per lead and kind."""
        return lead_job_key(kind, self.pk)


class IdempotentRequest(models.Model):
    """The first response to a request sent with an `Idempotency-Key` header, replayed for 24 h.

    The response is kept as the bytes sent, not as JSON: PostgreSQL's jsonb reorders an object's keys, and a
    replay must be the same answer.
    """

    scope = models.CharField(max_length=50, help_text="Which endpoint the key belongs to.")
    caller = models.CharField(max_length=64, help_text="Keyed hash of who sent the key: keys are per caller.")
    key = models.CharField(max_length=255)
    request_hash = models.CharField(max_length=64, help_text="sha256 of the request body.")
    response_status = models.PositiveSmallIntegerField()
    response_content = models.BinaryField(help_text="The response body as sent.")
    response_content_type = models.CharField(max_length=255)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["scope", "caller", "key"], name="idempotent_request_unique_caller_key")
        ]

    def __str__(self):
        return f"{self.scope}:{self.key}"
