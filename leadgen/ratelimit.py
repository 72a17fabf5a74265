"""Dual-bucket rate limit for prototype-eligible leads: one bucket per email, one per client IP.

Each bucket has an in-progress hold (a prototype is being generated: parallel
requests are refused) and a count of completed prototypes per window. A hold
is taken at intake and lives as long as its prototype: every check of the
prototype renews it (`prototype_buckets_extend`), a completed prototype
consumes quota and drops it, a failed or cancelled one only drops it. Its
expiry (LEADS_PROTOTYPE_HOLD_SECONDS after the last renewal) only frees a
visitor whose prototype nobody checks any more. State lives in the shared
cache; `cache.add` makes taking a hold atomic across processes.

A hold keeps its owner with its end: the request's Idempotency-Key (hashed),
when it sent one. A process killed after taking the hold and before saving the
lead leaves it behind; the visitor's retry with the same key takes the request
over (leadgen.idempotency) and must get the hold too, not a 429 for a
prototype nobody is preparing.
"""

import hashlib
import time
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache


@dataclass(frozen=True)
class BucketState:
    in_progress: bool
    used: int
    limit: int
    retry_after: int | None  # seconds until this bucket would accept a new prototype
    holder: str = ""  # the owner its hold was taken for, while in progress ("": none named)

    @property
    def blocked(self) -> bool:
        return self.retry_after is not None


@dataclass(frozen=True)
class BucketRefusal:
    code: str  # prototype_in_progress | prototype_quota_exceeded
    bucket: str  # email | ip
    retry_after: int


def _bucket_key(bucket: str, identifier: str, part: str) -> str:
    # Hashed: cache keys must not carry emails or IPs in the clear.
    digest = hashlib.sha256(identifier.strip().lower().encode()).hexdigest()[:32]
    return f"leads:prototype:{bucket}:{digest}:{part}"


def _identifiers(*, email: str | None, ip: str | None) -> list[tuple[str, str]]:
    return [(bucket, value) for bucket, value in (("email", email), ("ip", ip)) if value]


def _state(bucket: str, identifier: str, now: float) -> BucketState:
    values = cache.get_many([_bucket_key(bucket, identifier, part) for part in ("hold", "count", "window_ends")])
    hold_ends, holder = values.get(_bucket_key(bucket, identifier, "hold"), (None, ""))
    used = values.get(_bucket_key(bucket, identifier, "count"), 0)
    window_ends = values.get(_bucket_key(bucket, identifier, "window_ends"))
    limit = settings.LEADS_PROTOTYPE_QUOTA
    retry_after = None
    if hold_ends and hold_ends > now:
        retry_after = int(hold_ends - now) + 1
    elif used >= limit and window_ends:
        retry_after = int(window_ends - now) + 1
    in_progress = bool(hold_ends and hold_ends > now)
    return BucketState(in_progress, used, limit, retry_after, holder if in_progress else "")


def prototype_buckets_state(*, email: str | None, ip: str | None) -> dict[str, BucketState]:
    now = time.time()
    return {bucket: _state(bucket, value, now) for bucket, value in _identifiers(email=email, ip=ip)}


def prototype_buckets_hold(*, email: str | None, ip: str | None, owner: str = "") -> BucketRefusal | None:
    """Take the in-progress hold on both buckets, or neither; returns why not when refused. A hold `owner`
    (non-empty) already has is taken again."""
    now = time.time()
    hold_seconds = settings.LEADS_PROTOTYPE_HOLD_SECONDS
    taken = []
    for bucket, value in _identifiers(email=email, ip=ip):
        state = _state(bucket, value, now)
        key, hold = _bucket_key(bucket, value, "hold"), (now + hold_seconds, owner)
        mine = bool(owner) and state.holder == owner  # left by a request under this key that died
        if state.used >= state.limit and state.retry_after:
            refusal = BucketRefusal("prototype_quota_exceeded", bucket, state.retry_after)
        elif mine or cache.add(key, hold, hold_seconds):
            if mine:  # renewed: leadgen.idempotency lets one request of a key run at a time, so it is still ours
                cache.set(key, hold, hold_seconds)
            taken.append((bucket, value))
            continue
        else:
            refusal = BucketRefusal("prototype_in_progress", bucket, state.retry_after or hold_seconds)
        cache.delete_many([_bucket_key(b, v, "hold") for b, v in taken])
        return refusal
    return None


def prototype_buckets_extend(*, email: str | None, ip: str | None) -> None:
    """The prototype is still being worked on: its hold lasts another LEADS_PROTOTYPE_HOLD_SECONDS."""
    hold_seconds = settings.LEADS_PROTOTYPE_HOLD_SECONDS
    for bucket, value in _identifiers(email=email, ip=ip):
        key = _bucket_key(bucket, value, "hold")
        # set, not touch: the value holds the hold's end, which the lookup reports as retryAfter.
        if (hold := cache.get(key)) is not None:
            cache.set(key, (time.time() + hold_seconds, hold[1]), hold_seconds)


def prototype_buckets_release(*, email: str | None, ip: str | None) -> None:
    """A prototype failed or never started: drop the hold, keep the quota."""
    cache.delete_many([_bucket_key(bucket, value, "hold") for bucket, value in _identifiers(email=email, ip=ip)])


def prototype_buckets_consume(*, email: str | None, ip: str | None, once_key: str | None = None) -> bool:
    """A prototype completed: count it against both buckets' quota and drop the hold.

    With `once_key` (the prototype's), a second call with the same key counts
    nothing: concurrent checks and retried jobs consume the quota once.
    Returns whether this call counted.
    """
    window = settings.LEADS_PROTOTYPE_WINDOW_SECONDS
    if once_key is not None and not cache.add(f"leads:prototype:consumed:{once_key}", 1, window):
        prototype_buckets_release(email=email, ip=ip)
        return False
    for bucket, value in _identifiers(email=email, ip=ip):
        count_key = _bucket_key(bucket, value, "count")
        if cache.add(count_key, 1, window):
            cache.set(_bucket_key(bucket, value, "window_ends"), time.time() + window, window)
        else:
            try:
                cache.incr(count_key)
            except ValueError:  # the window expired between add and incr
                cache.add(count_key, 1, window)
                cache.set(_bucket_key(bucket, value, "window_ends"), time.time() + window, window)
    prototype_buckets_release(email=email, ip=ip)
    return True
