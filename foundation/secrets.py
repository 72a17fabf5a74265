"""The one check of a shared secret in a request header, for every keyed endpoint.

Constant-time (hmac.compare_digest, on bytes so non-ASCII input cannot raise),
an unset expected secret refuses everyone, and every refusal is the same 401
body whichever header or endpoint it was: a caller learns nothing about which
part was wrong, or whether the endpoint has a key configured.
"""

import hmac

from django.conf import settings
from rest_framework.exceptions import APIException


class InvalidSecret(APIException):
    # Not DRF's AuthenticationFailed: without an authentication class it turns into a 403.
    status_code = 401
    default_detail = "Missing or invalid credentials."
    default_code = "invalid_credentials"


def secret_matches(supplied: str | None, expected: str) -> bool:
    if not supplied or not expected:
        return False
    return hmac.compare_digest(supplied.encode(), expected.encode())


def header_secret_require(request, header: str, expected: str) -> None:
    """Raise InvalidSecret (401) unless `header` carries `expected`."""
    if not secret_matches(request.headers.get(header), expected):
        raise InvalidSecret()


def bearer_token(request) -> str | None:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else None


def bearer_secret_require(request, expected: str) -> None:
    """Raise InvalidSecret (401) unless `Authorization: Bearer <expected>`."""
    if not secret_matches(bearer_token(request), expected):
        raise InvalidSecret()


def trusted_chat_client(request, *, required: bool) -> bool:
    """Whether the trusted sales-chat agent sent this (`X-Chat-Api-Key`). A wrong key is refused, never
    silently downgraded; without the header, False unless `required`."""
    if "X-Chat-Api-Key" not in request.headers and not required:
        return False
    header_secret_require(request, "X-Chat-Api-Key", settings.CHAT_API_KEY)
    return True
