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

The request that holds a key also holds a session advisory lock on it, taken
before the row is read or written and dropped when the request ends. A process
killed mid-request loses its connection and so the lock: a retry then finds the
row still in progress with nobody holding it, and takes it over. If the dead
request had saved its lead (the row says so in the lead's own transaction), the
retry answers with that lead; if not, it runs the request as the first would.
"""

import hashlib
import json
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone
from django.utils.crypto import salted_hmac

from foundation.client_ip import client_ip_bucket
from leadgen.models import IdempotentRequest

IN_PROGRESS = 0
SAVED = 1  # the lead is saved, its answer not yet kept: response_content holds the lead's id


@dataclass(frozen=True)
class Replay:
    status: int
    content: bytes
    content_type: str


@dataclass(frozen=True)
class Saved:
    """A dead request's lead, saved before it could answer: the retry answers with it."""

    lead_id: int


class IdempotencyConflict(Exception):
    def __init__(self, code: str, message: str, status: int):
        super().__init__(message)
        self.code, self.message, self.status = code, message, status


def body_hash(raw: bytes) -> str:
    """The request's identity: its JSON without `recaptchaToken`, a one-use credential a retry must renew
    (the first attempt may have spent it before dying). A body that is not a JSON object counts as it is."""
    try:
        document = json.loads(raw)
    except ValueError:
        document = None
    if not isinstance(document, dict):
        return hashlib.sha256(raw).hexdigest()
    document.pop("recaptchaToken", None)
    return hashlib.sha256(json.dumps(document, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


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


def _lock_id(scope: str, caller: str, key: str) -> int:
    digest = hashlib.sha256(f"leadgen.idempotency\0{scope}\0{caller}\0{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def idempotency_owner(*, scope: str, caller: str, key: str) -> str:
    """An opaque name of whichever request holds this key (no key, caller or PII in it): for state the request
    keeps outside the database, which a retry taking a dead request over must know as its own."""
    return str(_lock_id(scope, caller, key))


def _owner_lock(scope: str, caller: str, key: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [_lock_id(scope, caller, key)])
        return cursor.fetchone()[0]


def _owner_unlock(scope: str, caller: str, key: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_unlock(%s)", [_lock_id(scope, caller, key)])


def idempotency_reserve(*, scope: str, caller: str, key: str, request_hash: str) -> Replay | Saved | None:
    """Reserve `caller`'s `key`: None when this request should run, a Replay of the stored response, or the
    Saved lead of a request that died before answering. Unless it raises or replays, the caller must end
    with idempotency_complete or idempotency_release, which drop the lock taken here."""
    if not _owner_lock(scope, caller, key):
        raise IdempotencyConflict("idempotency_key_in_use", "A request with this key is still being processed.", 409)
    try:
        outcome = _reserve_locked(scope=scope, caller=caller, key=key, request_hash=request_hash)
    except BaseException:
        _owner_unlock(scope, caller, key)
        raise
    if isinstance(outcome, Replay):
        _owner_unlock(scope, caller, key)
    return outcome


def _reserve_locked(*, scope: str, caller: str, key: str, request_hash: str) -> Replay | Saved | None:
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
    if existing is None:  # expired and purged between our insert and read: let the client retry
        raise IdempotencyConflict("idempotency_key_in_use", "Retry this request.", 409)
    if existing.request_hash != request_hash:
        raise IdempotencyConflict(
            "idempotency_key_reused", "This Idempotency-Key was used with a different request body.", 422
        )
    if existing.response_status == IN_PROGRESS:  # its request died (we hold the lock) before saving: run again
        return None
    if existing.response_status == SAVED:
        return Saved(int(bytes(existing.response_content)))
    return Replay(existing.response_status, bytes(existing.response_content), existing.response_content_type)


def idempotency_lead_saved(*, scope: str, caller: str, key: str, lead_id: int) -> None:
    """In the lead's own transaction: a request that dies after this is answered from the lead on retry."""
    IdempotentRequest.objects.filter(scope=scope, caller=caller, key=key).update(
        response_status=SAVED, response_content=str(lead_id).encode()
    )


def idempotency_complete(*, scope: str, caller: str, key: str, status: int, content: bytes, content_type: str) -> None:
    try:
        mine = IdempotentRequest.objects.filter(scope=scope, caller=caller, key=key)
        if status >= 500 or status == 429:
            mine.filter(response_status=IN_PROGRESS).delete()  # a saved lead stays: its retry answers with it
        else:
            mine.update(response_status=status, response_content=content, response_content_type=content_type)
    finally:
        _owner_unlock(scope, caller, key)


def idempotency_release(*, scope: str, caller: str, key: str) -> None:
    try:
        IdempotentRequest.objects.filter(scope=scope, caller=caller, key=key, response_status=IN_PROGRESS).delete()
    finally:
        _owner_unlock(scope, caller, key)
