"""Explicit input and output shapes of the intake API (camelCase on the wire)."""

import phonenumbers
from django.conf import settings
from rest_framework import serializers

from leadgen.models import Lead

MAX_STEPS = 30
MAX_STEP_KEY = 64
MAX_STEP_TEXT = 2000
MAX_STEP_CHOICES = 20
UTM_KEYS = ("source", "medium", "campaign", "term", "content")


class RawMaxLengthMixin:
    """`max_length` as the OpenAPI schema states it: of the text as sent.

    DRF trims whitespace before it checks the length, so a value over the
    schema's maxLength was accepted when it began or ended with spaces
    (schemathesis found it).
    """

    def to_internal_value(self, data):
        if isinstance(data, str) and self.max_length is not None and len(data) > self.max_length:
            self.fail("max_length", max_length=self.max_length)
        return super().to_internal_value(data)


class StrictCharField(RawMaxLengthMixin, serializers.CharField):
    """DRF turns numbers and booleans into text; a form sends text, so anything else is refused."""

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class BoundedEmailField(RawMaxLengthMixin, serializers.EmailField):
    pass


class BoundedURLField(RawMaxLengthMixin, serializers.URLField):
    pass


class UtmSerializer(serializers.Serializer):
    source = StrictCharField(max_length=200, required=False, allow_blank=True)
    medium = StrictCharField(max_length=200, required=False, allow_blank=True)
    campaign = StrictCharField(max_length=200, required=False, allow_blank=True)
    term = StrictCharField(max_length=200, required=False, allow_blank=True)
    content = StrictCharField(max_length=200, required=False, allow_blank=True)


class StepsField(serializers.DictField):
    """The form's step answers: a small map of question → text or list of choices."""

    def to_internal_value(self, data):
        steps = super().to_internal_value(data)
        if len(steps) > MAX_STEPS:
            raise serializers.ValidationError(f"At most {MAX_STEPS} steps.")
        for key, value in steps.items():
            if len(key) > MAX_STEP_KEY:
                raise serializers.ValidationError(f"Step names are at most {MAX_STEP_KEY} characters.")
            if isinstance(value, str | int | float | bool) or value is None:
                if len(str(value)) > MAX_STEP_TEXT:
                    raise serializers.ValidationError(f"Step {key!r}: at most {MAX_STEP_TEXT} characters.")
            elif isinstance(value, list):
                if len(value) > MAX_STEP_CHOICES or not all(isinstance(v, str) and len(v) <= 200 for v in value):
                    raise serializers.ValidationError(
                        f"Step {key!r}: at most {MAX_STEP_CHOICES} choices of up to 200 characters."
                    )
            else:
                raise serializers.ValidationError(f"Step {key!r}: a text, a number or a list of choices.")
        return steps


class LeadInputSerializer(serializers.Serializer):
    firstName = StrictCharField(source="first_name", min_length=1, max_length=100)
    lastName = StrictCharField(source="last_name", max_length=100, required=False, allow_blank=True)
    email = BoundedEmailField(max_length=254)
    phone = StrictCharField(max_length=32, required=False, allow_blank=True)
    company = StrictCharField(max_length=200, required=False, allow_blank=True)
    message = StrictCharField(max_length=5000, required=False, allow_blank=True)
    serviceType = serializers.ChoiceField(
        source="service_type", choices=Lead.ServiceType.choices, required=False, allow_blank=True
    )
    sourcePage = BoundedURLField(source="source_page", max_length=500, required=False, allow_blank=True)
    utm = UtmSerializer(required=False)
    steps = StepsField(required=False, child=serializers.JSONField())
    recaptchaToken = StrictCharField(max_length=4000, required=False, allow_blank=True, write_only=True)

    def validate_phone(self, value):
        if not value.strip():
            return ""
        try:
            number = phonenumbers.parse(value, settings.LEADS_PHONE_REGION)
        except phonenumbers.NumberParseException as exc:
            raise serializers.ValidationError("Enter a valid phone number.") from exc
        if not phonenumbers.is_valid_number(number):
            raise serializers.ValidationError("Enter a valid phone number.")
        return phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)

    def validate_email(self, value):
        return value.strip().lower()


class PipedriveStateSerializer(serializers.Serializer):
    status = serializers.CharField()
    leadId = serializers.CharField(allow_null=True)


class LeadCreatedSerializer(serializers.Serializer):
    leadId = serializers.IntegerField()
    previewUrl = serializers.URLField(allow_null=True)
    pipedrive = PipedriveStateSerializer()


class BucketStateSerializer(serializers.Serializer):
    inProgress = serializers.BooleanField()
    used = serializers.IntegerField()
    limit = serializers.IntegerField()
    retryAfter = serializers.IntegerField(allow_null=True)


class RateLimitStateSerializer(serializers.Serializer):
    email = BucketStateSerializer()
    ip = BucketStateSerializer(allow_null=True)


class LeadSummarySerializer(serializers.Serializer):
    leadId = serializers.IntegerField()
    status = serializers.CharField()
    serviceType = serializers.CharField()
    createdAt = serializers.DateTimeField()
    previewUrl = serializers.URLField(allow_null=True)
    pipedrive = PipedriveStateSerializer()


class LeadLookupInputSerializer(serializers.Serializer):
    email = BoundedEmailField(max_length=254)
    sessionId = serializers.CharField(max_length=128, required=False)


class LeadLookupSerializer(serializers.Serializer):
    found = serializers.BooleanField()
    lead = LeadSummarySerializer(allow_null=True)
    rateLimit = RateLimitStateSerializer()
