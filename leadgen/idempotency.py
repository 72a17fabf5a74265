"""`Idempotency-Key` for the intake API: the same key and body within the TTL replays the first response.

The key is reserved before any work (a unique row), so two concurrent requests
with one key cannot both create a lead: the second gets 409 until the first
answers. Requests that fail with 5xx or 429 release the key so a retry can run.
"""

import hashlib
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from leadgen.models import IdempotentRequest

IN_PROGRESS = 0


@dataclass(frozen=True)
class Replay:
    status: int
    body: dict


class IdempotencyConflict(Exception):
    def __init__(self, code: str, message: str, status: int):
        super().__init__(message)
        self.code, self.message, self.status = code, message, status


def body_hash(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


def _expired_before():
    return timezone.now() - timedelta(seconds=settings.LEADS_IDEMPOTENCY_TTL_SECONDS)


def idempotency_purge_expired() -> int:
    """Drop records past the TTL; the hourly beat task keeps the table small."""
    deleted, _ = IdempotentRequest.objects.filter(created_at__lt=_expired_before()).delete()
    return deleted


def idempotency_reserve(*, scope: str, key: str, request_hash: str) -> Replay | None:
    """Reserve `key`; returns the stored response to replay, or None when this request should run."""
    IdempotentRequest.objects.filter(scope=scope, key=key, created_at__lt=_expired_before()).delete()
    try:
        with transaction.atomic():
            IdempotentRequest.objects.create(
                scope=scope, key=key, request_hash=request_hash, response_status=IN_PROGRESS, response_body={}
            )
        return None
    except IntegrityError:
        existing = IdempotentRequest.objects.filter(scope=scope, key=key).first()
    if existing is None:  # released between our insert and read: let the client retry
        raise IdempotencyConflict("idempotency_key_in_use", "Retry this request.", 409)
    if existing.request_hash != request_hash:
        raise IdempotencyConflict(
            "idempotency_key_reused", "This Idempotency-Key was used with a different request body.", 422
        )
    if existing.response_status == IN_PROGRESS:
        raise IdempotencyConflict("idempotency_key_in_use", "A request with this key is still being processed.", 409)
    return Replay(existing.response_status, existing.response_body)


def idempotency_complete(*, scope: str, key: str, status: int, body: dict) -> None:
    if status >= 500 or status == 429:
        IdempotentRequest.objects.filter(scope=scope, key=key, response_status=IN_PROGRESS).delete()
    else:
        IdempotentRequest.objects.filter(scope=scope, key=key).update(response_status=status, response_body=body)


def idempotency_release(*, scope: str, key: str) -> None:
    IdempotentRequest.objects.filter(scope=scope, key=key, response_status=IN_PROGRESS).delete()
