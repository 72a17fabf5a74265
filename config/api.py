"""API plumbing shared by every DRF view: one JSON error shape.

    {"error": {"code": "invalid", "message": "...", "fields": {"email": ["..."]}}}

`fields` is present only for validation errors and maps each field to its
messages, so a form can show them inline.
"""

from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.http import Http404
from rest_framework import exceptions, status
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


def exception_handler(exc, context):
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
