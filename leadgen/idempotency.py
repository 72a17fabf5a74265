"""`Idempotency-Key` for the intake API: the same key and body within the TTL replays the first response.

The key is reserved before any work (a unique row), so two concurrent requests
with one key cannot both create a lead: the second gets 409 until the first
answers. Requests that fail with 5xx or 429 release the key so a retry can run.

Keys belong to the caller that sent them, as Stripe's belong to an account:
another caller's request with the same key is a new request, neither replayed
(it would hand out someone else's lead) nor refused (a 422 would tell it that
the key exists). The caller is the authenticated principal when there is one
(the chat agent, wherever it calls from), else the visitor's network as the
rate limits count it (an IPv4 address, an IPv6 /64, so a retry after a privacy
address change still replays). A request with no identifiable caller is never
replayed: it runs as if it had no key.

A replay is the response as first sent: status, content type and body bytes.
"""

import hashlib
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.crypto import salted_hmac

from config.client_ip import client_ip_bucket
from leadgen.models import IdempotentRequest

IN_PROGRESS = 0


@dataclass(frozen=True)
class Replay:
    status: int
    content: bytes
    content_type: str


class IdempotencyConflict(Exception):
    def __init__(self, code: str, message: str, status: int):
        super().__init__(message)
        self.code, self.message, self.status = code, message, status


def body_hash(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


def idempotency_caller(request, *, trusted_chat: bool) -> str | None:
    """Whose keys these are, as a keyed hash (the table keeps no visitor address); None when unknown."""
    if trusted_chat:
        identity = "chat-agent"
    elif (network := client_ip_bucket(request)) is not None:
        identity = f"network:{network}"
    else:
        return None
    return salted_hmac("leadgen.idempotency.caller", identity, algorithm="sha256").hexdigest()


def _expired_before():
    return timezone.now() - timedelta(seconds=settings.LEADS_IDEMPOTENCY_TTL_SECONDS)


def idempotency_purge_expired() -> int:
    """Drop records past the TTL; the hourly beat task keeps the table small."""
    deleted, _ = IdempotentRequest.objects.filter(created_at__lt=_expired_before()).delete()
    return deleted


def idempotency_reserve(*, scope: str, caller: str, key: str, request_hash: str) -> Replay | None:
    """Reserve `caller`'s `key`; returns the stored response to replay, or None when this request should run."""
    mine = IdempotentRequest.objects.filter(scope=scope, caller=caller, key=key)
    mine.filter(created_at__lt=_expired_before()).delete()
    try:
        with transaction.atomic():
            IdempotentRequest.objects.create(
                scope=scope,
                caller=caller,
                key=key,
                request_hash=request_hash,
                response_status=IN_PROGRESS,
                response_content=b"",
                response_content_type="",
            )
        return None
    except IntegrityError:
        existing = mine.first()
    if existing is None:  # released between our insert and read: let the client retry
        raise IdempotencyConflict("idempotency_key_in_use", "Retry this request.", 409)
    if existing.request_hash != request_hash:
        raise IdempotencyConflict(
            "idempotency_key_reused", "This Idempotency-Key was used with a different request body.", 422
        )
    if existing.response_status == IN_PROGRESS:
        raise IdempotencyConflict("idempotency_key_in_use", "A request with this key is still being processed.", 409)
    return Replay(existing.response_status, bytes(existing.response_content), existing.response_content_type)


def idempotency_complete(*, scope: str, caller: str, key: str, status: int, content: bytes, content_type: str) -> None:
    mine = IdempotentRequest.objects.filter(scope=scope, caller=caller, key=key)
    if status >= 500 or status == 429:
        mine.filter(response_status=IN_PROGRESS).delete()
    else:
        mine.update(response_status=status, response_content=content, response_content_type=content_type)


def idempotency_release(*, scope: str, caller: str, key: str) -> None:
    IdempotentRequest.objects.filter(scope=scope, caller=caller, key=key, response_status=IN_PROGRESS).delete()
