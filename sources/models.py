"""Inbound lead sources: ad and form platforms that send us leads by signed webhook, and the log of what
each one sent."""

import uuid

from django.db import models
from django.utils import timezone

from leadgen import selectors as lead_selectors


class InboundSource(models.Model):
    """One platform account sending leads to its own URL, with the secrets that prove a request is its own."""

    class Kind(models.TextChoices):
        FACEBOOK = "facebook", "Facebook Lead Ads"
        GOOGLE_ADS = "google_ads", "Google Ads lead form"
        TYPEFORM = "typeform", "Typeform"
        WEBFLOW = "webflow", "Webflow form"
        GENERIC = "generic", "Generic JSON (Standard Webhooks)"

    public_id = models.UUIDField(
        default=uuid.uuid4, unique=True, editable=False, help_text="The source's id in its webhook URL."
    )
    name = models.CharField(max_length=120)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    store = models.ForeignKey(
        "stores.Store", null=True, blank=True, on_delete=models.PROTECT, help_text="The store its leads belong to."
    )
    is_active = models.BooleanField(default=True, help_text="An inactive source's URL answers 404.")
    send_confirmation = models.BooleanField(
        default=False,
        help_text="Email the people this source sends: the confirmation of a lead, the decline of a vendor pitch.",
    )
    default_service_type = models.CharField(
        max_length=32,
        blank=True,
        choices=lead_selectors.service_type_choices,
        help_text="The service type of its leads when the mapping gives none.",
    )
    field_mapping = models.JSONField(
        default=dict,
        blank=True,
        help_text="Our lead field → the platform's field key (for generic JSON: a JMESPath expression into the "
        "document). Empty: the platform's usual fields.",
    )
    # Write-only in the admin: never shown back.
    secret = models.CharField(
        max_length=500,
        blank=True,
        help_text="Facebook app secret, Google Ads webhook key, Typeform or Webflow signing secret, or a "
        "Standard Webhooks whsec_… secret. Unset: every request is refused.",
    )
    verify_token = models.CharField(
        max_length=500, blank=True, help_text="Facebook only: the verify token of the webhook subscription."
    )
    access_token = models.CharField(
        max_length=1000, blank=True, help_text="Facebook only: the page access token that reads the leads."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return f"{self.name} ({self.get_kind_display()})"

    @property
    def secrets(self) -> dict[str, str]:
        return {"secret": self.secret, "verify_token": self.verify_token, "access_token": self.access_token}


class InboundRequest(models.Model):
    """A request a source's URL received: what came, whether its signature held, and what it became.

    The body is kept only when the signature held: of an unauthenticated request only the fact is kept.
    """

    class Outcome(models.TextChoices):
        CREATED = "created", "Lead created"
        DUPLICATE = "duplicate", "Duplicate (already received)"
        TEST = "test", "Test lead"
        REFUSED_SIGNATURE = "refused_signature", "Signature refused"
        UNREADABLE = "unreadable", "Unreadable"
        INVALID = "invalid", "Invalid fields"
        PENDING_FETCH = "pending_fetch", "Fetching the lead"
        FAILED = "failed", "Failed"
        IGNORED = "ignored", "No lead in it"  # another event of the platform (a partial form, another field)

    source = models.ForeignKey(InboundSource, on_delete=models.CASCADE, related_name="requests")
    store = models.ForeignKey(
        "stores.Store", null=True, blank=True, on_delete=models.PROTECT, help_text="The source's, when received."
    )
    received_at = models.DateTimeField(default=timezone.now, db_index=True)
    headers = models.JSONField(default=dict, blank=True, help_text="Content type, user agent and the platform's own.")
    body = models.TextField(blank=True)
    fetched = models.JSONField(
        default=dict, blank=True, help_text="Facebook: each lead as the Graph API answered, by leadgen id."
    )
    signature_ok = models.BooleanField(default=False)
    outcome = models.CharField(max_length=20, choices=Outcome.choices)
    errors = models.JSONField(default=dict, blank=True, help_text="Field → what was wrong with it.")
    results = models.JSONField(
        default=dict, blank=True, help_text="Each lead in the request by its platform id: outcome, lead, errors."
    )
    platform_id = models.CharField(max_length=255, blank=True, help_text="The platform's id of the (first) lead.")
    lead = models.ForeignKey("leadgen.Lead", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        ordering = ["-received_at", "-pk"]
        indexes = [models.Index(fields=["source", "-received_at"], name="inbound_request_source_recent")]
        permissions = [("replay_inboundrequest", "Can replay a logged request")]

    def __str__(self):
        return f"{self.source.name} {self.received_at:%Y-%m-%d %H:%M:%S} {self.outcome}"


class InboundLead(models.Model):
    """A platform's lead, once: its id per source is unique, so a platform's retry never makes a second lead."""

    source = models.ForeignKey(InboundSource, on_delete=models.CASCADE, related_name="+")
    platform_id = models.CharField(max_length=255)
    lead = models.ForeignKey("leadgen.Lead", on_delete=models.CASCADE, related_name="+")
    request = models.ForeignKey(
        InboundRequest, null=True, blank=True, on_delete=models.SET_NULL, related_name="leads_made"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["source", "platform_id"], name="inbound_lead_unique_platform_id")
        ]

    def __str__(self):
        return f"{self.source_id}:{self.platform_id}"
