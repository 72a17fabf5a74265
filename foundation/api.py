"""API plumbing shared by every DRF view: one JSON error shape, and input fields that are strict about
what a form sends.

    {"error": {"code": "invalid", "message": "...", "fields": {"email": ["..."]}}}

`fields` is present only for validation errors and maps each field to its
messages, so a form can show them inline.
"""

from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.core.validators import ProhibitNullCharactersValidator, RegexValidator
from django.db import InterfaceError, OperationalError
from django.http import Http404
from rest_framework import exceptions, serializers, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler


def _first_code(codes):
    if isinstance(codes, dict):
        codes = next(iter(codes.values()), "invalid")
    if isinstance(codes, list):
        codes = codes[0] if codes else "invalid"
    return codes if isinstance(codes, str) else _first_code(codes)


def error_body(code, message, fields=None):
    error = {"code": code, "message": message}
    if fields is not None:
        error["fields"] = fields
    return {"error": error}


class PayloadTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "Request body is too large."
    default_code = "too_large"


class DatabaseUnavailable(exceptions.APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_detail = "We cannot take requests for a moment; please try again shortly."
    default_code = "database_unavailable"


DATABASE_RETRY_AFTER_SECONDS = 30


def exception_handler(exc, context):
    if isinstance(exc, OperationalError | InterfaceError):
        # The database is down or unreachable: nothing was saved, and the client may try again.
        exc = DatabaseUnavailable()
        response = exception_handler(exc, context)
        response["Retry-After"] = str(DATABASE_RETRY_AFTER_SECONDS)
        return response
    if isinstance(exc, RequestDataTooBig):
        exc = PayloadTooLarge()
    elif isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        detail = exc.detail if isinstance(exc.detail, dict) else {"non_field_errors": exc.detail}
        body = error_body(
            _first_code(exc.get_codes()) if isinstance(exc.detail, dict) else "invalid",
            "Some fields are invalid.",
            fields=detail,
        )
    else:
        body = error_body(_first_code(exc.get_codes()), str(exc.detail))
    return Response(body, status=response.status_code, headers=dict(response.items()))


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


# DRF refuses NUL characters in every CharField; the schema says so with a pattern. The pattern does
# not match "": for a field that allows blank, drf-spectacular adds `oneOf` an empty string, and "" must
# match only that alternative (DRF never runs validators on a blank value).
NO_NUL = RegexValidator(r"^[^\x00]+$", message="Null characters are not allowed.")
# What DRF trims (str.strip(): the characters str.isspace() names), spelled out for a character class: a schema's
# pattern is read as ECMAScript, whose \s differs from Python's (U+001C–U+001F, U+0085 are not in it; U+FEFF is),
# so a pattern with \s would let a client send what the check refuses.
WHITESPACE = r"\t\n\x0b\x0c\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
# Text that is not only whitespace (DRF trims it, then refuses the blank), without NUL characters.
NOT_BLANK = RegexValidator(rf"^[^\x00]*[^\x00{WHITESPACE}][^\x00]*$", message="This field may not be blank.")


class StrictCharField(RawMaxLengthMixin, serializers.CharField):
    """DRF turns numbers and booleans into text; a form sends text, so anything else is refused.

    Its schema states what the checks enforce: a field given no pattern of its own gets NO_NUL's.
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        # Every pattern here excludes NUL: DRF's own NUL check would only say it twice.
        validators = [v for v in self.validators if not isinstance(v, ProhibitNullCharactersValidator)]
        if not any(isinstance(validator, RegexValidator) for validator in validators):
            validators.append(NO_NUL)
        self.validators = validators

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class ExactPatternField(StrictCharField):
    """Text that matches `pattern` as sent: never trimmed first, and its `$` never matches before a final
    newline (Python's does; the schema's does not), so what is stored is exactly what was checked."""

    def __init__(self, pattern: str, *, message: str, **kwargs):
        validator = RegexValidator(pattern.removesuffix("$") + r"\Z", message=message)
        super().__init__(trim_whitespace=False, validators=[validator], **kwargs)


class BoundedEmailField(RawMaxLengthMixin, serializers.EmailField):
    pass


class BoundedURLField(RawMaxLengthMixin, serializers.URLField):
    pass
