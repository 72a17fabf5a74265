"""Explicit input and output shapes of the intake API (camelCase on the wire)."""

import phonenumbers
from django.conf import settings
from django.core.validators import RegexValidator
from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from chat import services as chat_services
from foundation.api import NOT_BLANK, BoundedEmailField, ExactPatternField, StrictCharField
from leadgen.consent import CONSENT_TEXTS, CONSENT_VERSION
from leadgen.models import Lead

MAX_STEPS = 30
MAX_STEP_KEY = 64
MAX_STEP_TEXT = 2000
MAX_STEP_CHOICES = 20
UTM_KEYS = ("source", "medium", "campaign", "term", "content")


@extend_schema_field(
    {
        "type": "string",
        "format": "phone",
        "description": "A phone number valid in its numbering plan (at most 32 characters; without a +country "
        "it is read in the site's region), or empty.",
    }
)
class PhoneField(StrictCharField):
    """A phone number valid in its numbering plan (read in LEADS_PHONE_REGION without a +country), or "".

    The schema names it format `phone`, which says all of that: no pattern or length can say which numbers a
    numbering plan assigns, and a length would only tell fuzzers to try numbers of that length.
    Hence no max_length or pattern on the field itself (drf-spectacular would add them to the schema):
    the length is checked here, and a NUL is never part of a valid number.
    """

    MAX_LENGTH = 32

    def __init__(self, **kwargs):
        serializers.CharField.__init__(self, **kwargs)

    def to_internal_value(self, data):
        if isinstance(data, str) and len(data) > self.MAX_LENGTH:
            raise serializers.ValidationError("Enter a valid phone number.")
        return super().to_internal_value(data)


# The page the form was sent from: an http(s) URL, checked by this pattern alone so that the schema (which
# states it) and the check agree; Django's URLValidator also refused hosts the schema's `uri` format allows.
# No control characters or spaces after the host, spelled out: `\s` means other characters in Python
# than in the JSON Schema (ECMA) regex the schema states, and the two must refuse the same values.
SOURCE_PAGE = RegexValidator(
    r"^https?://[A-Za-z0-9.-]{1,253}(?::[0-9]{1,5})?(?:[/?#][^\x00-\x20\x7f]*)?$", message="Enter a valid http(s) URL."
)


class UtmSerializer(serializers.Serializer):
    source = StrictCharField(max_length=200, required=False, allow_blank=True)
    medium = StrictCharField(max_length=200, required=False, allow_blank=True)
    campaign = StrictCharField(max_length=200, required=False, allow_blank=True)
    term = StrictCharField(max_length=200, required=False, allow_blank=True)
    content = StrictCharField(max_length=200, required=False, allow_blank=True)


NO_NUL_PATTERN = "^[^\\u0000]*$"
STEP_VALUE_SCHEMA = {
    "anyOf": [
        {"type": "string", "maxLength": MAX_STEP_TEXT, "pattern": NO_NUL_PATTERN},
        {"type": "number"},
        {"type": "boolean"},
        {
            "type": "array",
            "maxItems": MAX_STEP_CHOICES,
            "items": {"type": "string", "maxLength": 200, "pattern": NO_NUL_PATTERN},
        },
    ],
}


@extend_schema_field(
    {
        "type": "object",
        "maxProperties": MAX_STEPS,
        "propertyNames": {"maxLength": MAX_STEP_KEY, "pattern": NO_NUL_PATTERN},
        "additionalProperties": STEP_VALUE_SCHEMA,
    }
)
class StepsField(serializers.DictField):
    """The form's step answers: a small map of question → text or list of choices."""

    def to_internal_value(self, data):
        steps = super().to_internal_value(data)
        if len(steps) > MAX_STEPS:
            raise serializers.ValidationError(f"At most {MAX_STEPS} steps.")
        for key, value in steps.items():
            if len(key) > MAX_STEP_KEY:
                raise serializers.ValidationError(f"Step names are at most {MAX_STEP_KEY} characters.")
            # PostgreSQL's JSON text cannot hold NUL: refused here, as every text field refuses it.
            texts = [key, *(value if isinstance(value, list) else [value])]
            if any(isinstance(text, str) and "\x00" in text for text in texts):
                raise serializers.ValidationError("Null characters are not allowed.")
            if isinstance(value, str | int | float | bool):
                if isinstance(value, str) and len(value) > MAX_STEP_TEXT:
                    raise serializers.ValidationError(f"Step {key!r}: at most {MAX_STEP_TEXT} characters.")
            elif isinstance(value, list):
                if len(value) > MAX_STEP_CHOICES or not all(isinstance(v, str) and len(v) <= 200 for v in value):
                    raise serializers.ValidationError(
                        f"Step {key!r}: at most {MAX_STEP_CHOICES} choices of up to 200 characters."
                    )
            else:
                raise serializers.ValidationError(f"Step {key!r}: a text, a number or a list of choices.")
        return steps


@extend_schema_field(
    {
        "oneOf": [
            {"type": "boolean"},
            *(
                {
                    "type": "object",
                    "properties": {
                        "version": {"type": "string", "enum": [version]},
                        "text": {"type": "string", "enum": [text]},
                    },
                    "required": ["version"],
                    "additionalProperties": False,
                }
                for version, text in CONSENT_TEXTS.items()
            ),
        ],
        "description": "The consent the form showed and the person agreed to: its version (and, to check it, its "
        "text, exactly as shown), or true for the current version. The lead records the server's text of that "
        "version and the time it arrived; false or absent records none.",
    }
)
class ConsentField(serializers.Field):
    """Consent given on the form, as the Lead fields that record it (merged into the validated data).

    What is recorded is the server's text of the version named, never a text the client sends: a client that
    sends a text must send that version's exact text, so nobody can record agreement to something else.
    """

    default_error_messages = {
        "invalid": "Send true, or the version of the consent shown and, optionally, its text.",
        "unknown_version": "This version of the consent is unknown: reload the page to read the current one.",
        "other_text": "This is not the text of that version of the consent.",
    }

    def __init__(self, **kwargs):
        super().__init__(source="*", **kwargs)

    def to_internal_value(self, data):
        if data is False:
            return {}
        if data is True:
            version = CONSENT_VERSION
        elif isinstance(data, dict) and set(data) <= {"version", "text"} and isinstance(data.get("version"), str):
            version = data["version"]
            if version not in CONSENT_TEXTS:
                self.fail("unknown_version")
            if "text" in data and data["text"] != CONSENT_TEXTS[version]:
                self.fail("other_text")
        else:
            self.fail("invalid")
        return {"consent_version": version, "consent_text": CONSENT_TEXTS[version], "consented_at": timezone.now()}


class LeadInputSerializer(serializers.Serializer):
    firstName = StrictCharField(source="first_name", min_length=1, max_length=100, validators=[NOT_BLANK])
    lastName = StrictCharField(source="last_name", max_length=100, required=False, allow_blank=True)
    email = BoundedEmailField(max_length=254)
    phone = PhoneField(required=False, allow_blank=True)
    company = StrictCharField(max_length=200, required=False, allow_blank=True)
    message = StrictCharField(max_length=5000, required=False, allow_blank=True)
    serviceType = serializers.ChoiceField(
        source="service_type", choices=Lead.ServiceType.choices, required=False, allow_blank=True
    )
    sourcePage = StrictCharField(
        source="source_page", max_length=500, required=False, allow_blank=True, validators=[SOURCE_PAGE]
    )
    utm = UtmSerializer(required=False)
    steps = StepsField(required=False, child=serializers.JSONField())
    consent = ConsentField(required=False, write_only=True)
    recaptchaToken = StrictCharField(max_length=4000, required=False, allow_blank=True, write_only=True)
    sessionId = ExactPatternField(
        chat_services.SESSION_ID_PATTERN,
        message=chat_services.SESSION_ID_INVALID,
        required=False,
        write_only=True,
        help_text="Chat key only: the chat session the lead came from (or the X-Chat-Session-Id header).",
    )

    def validate_phone(self, value):
        if not value.strip():
            return ""
        try:
            number = phonenumbers.parse(value, settings.PHONE_DEFAULT_REGION)
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


class PrototypeStateSerializer(serializers.Serializer):
    state = serializers.CharField()
    progressUrl = serializers.CharField(help_text="The visitor's progress page.")
    error = serializers.CharField(allow_null=True, help_text="Why it failed, when it did.")


class LeadCreatedSerializer(serializers.Serializer):
    leadId = serializers.UUIDField()
    previewUrl = serializers.URLField(allow_null=True)
    pipedrive = PipedriveStateSerializer()
    prototype = PrototypeStateSerializer(allow_null=True, help_text="For prototype-eligible leads.")


class BucketStateSerializer(serializers.Serializer):
    inProgress = serializers.BooleanField()
    used = serializers.IntegerField()
    limit = serializers.IntegerField()
    retryAfter = serializers.IntegerField(allow_null=True)


class RateLimitStateSerializer(serializers.Serializer):
    email = BucketStateSerializer()
    ip = BucketStateSerializer(allow_null=True)


class LeadSummarySerializer(serializers.Serializer):
    leadId = serializers.UUIDField()
    status = serializers.CharField()
    serviceType = serializers.CharField()
    createdAt = serializers.DateTimeField()
    previewUrl = serializers.URLField(allow_null=True)
    pipedrive = PipedriveStateSerializer()


class LeadLookupInputSerializer(serializers.Serializer):
    email = BoundedEmailField(max_length=254)
    # An empty value means no session, as DRF reads a blank optional query parameter as absent; the schema says so.
    sessionId = ExactPatternField(
        chat_services.SESSION_ID_PATTERN, message=chat_services.SESSION_ID_INVALID, required=False
    )


class LeadLookupSerializer(serializers.Serializer):
    found = serializers.BooleanField()
    lead = LeadSummarySerializer(allow_null=True)
    rateLimit = RateLimitStateSerializer()
