"""How many streams a client may hold open at once: the prototypes' progress stream and the sales chat's answer.

Opening a stream is rate limited (foundation.throttling), but a stream lives for
minutes (a progress stream up to PROTOTYPES_STREAM_MAX_SECONDS), so a client
opening at the allowed rate would hold hundreds. A stream takes a slot under
each of its keys (its client's IP bucket; its lead, its chat session) before it
answers, and gives them back when its response ends, however it ends: finished,
the client gone (Django cancels the response), or failed. A key at its cap
refuses the open: 429 with Retry-After, and nothing else is done for it.

A slot is a lease in a sorted set per key in the shared Redis (member: the
stream's id, score: when the lease lapses), so the caps hold across web
processes. Taking the slots of one stream is one Lua script: lapsed leases
dropped, every key checked against its cap, then the slot taken under all keys
or none. A lease lasts STREAM_LEASE_SECONDS and is renewed while its response
is being sent, by one task per process for all its streams, so the slots of a
process that dies lapse within STREAM_LEASE_SECONDS instead of being lost for
good; so do those of a stream whose response never started (its client left
first).

When Redis cannot be reached the stream opens and a warning is logged, as the
throttles do: an outage must not close every stream.
"""

import asyncio
import contextlib
import uuid
from dataclasses import dataclass, field

import structlog
from django.conf import settings
from django.core.cache import cache
from django.http import JsonResponse
from redis.exceptions import RedisError

from foundation.api import error_body
from foundation.batching import Batches
from foundation.cache import shared_redis

logger = structlog.get_logger(__name__)

# A stream's end cannot be foreseen (a tab closing is the usual one): a short wait, then try again.
RETRY_AFTER_SECONDS = 10

# KEYS: the stream's keys; ARGV: the lease in ms, the stream's id, then each key's cap. 0 if taken, else the
# (1-based) index of the key at its cap. Redis's clock, so that the processes' clocks need not agree.
_TAKE = """
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local lease_ms = tonumber(ARGV[1])
for i, key in ipairs(KEYS) do
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now_ms)
  if redis.call('ZCARD', key) >= tonumber(ARGV[i + 2]) then
    return i
  end
end
for _, key in ipairs(KEYS) do
  redis.call('ZADD', key, now_ms + lease_ms, ARGV[2])
  redis.call('PEXPIRE', key, lease_ms)
end
return 0
"""
# KEYS: keys; ARGV: the lease in ms, then the stream id held under each key. XX: a slot already given back
# (or lapsed) is not taken again by a renewal that crossed its release.
_RENEW = """
local now = redis.call('TIME')
local until_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) + tonumber(ARGV[1])
for i, key in ipairs(KEYS) do
  if redis.call('ZADD', key, 'XX', 'CH', until_ms, ARGV[i + 1]) == 1 then
    redis.call('PEXPIRE', key, tonumber(ARGV[1]))
  end
end
return 0
"""


@dataclass(frozen=True)
class Lease:
    """One stream's slots: the cache keys it holds a slot under (none when nothing caps it)."""

    keys: tuple[str, ...]
    id: str = field(default_factory=lambda: uuid.uuid4().hex)


def slots_take(claims: list[list[tuple[str, int]]]) -> list[Lease | None]:
    """For each claim, `[(key, cap), …]` (a cap of 0 or less: no cap), a Lease on a slot under every key, or
    None when a key is at its cap. One pipelined round trip for all the claims."""
    wanted = [[(cache.make_key(f"streams:{key}"), cap) for key, cap in claim if cap > 0] for claim in claims]
    leases = [Lease(keys=tuple(key for key, _ in claim)) for claim in wanted]
    pipeline = shared_redis().pipeline(transaction=False)
    for lease, claim in zip(leases, wanted, strict=True):
        caps = [cap for _, cap in claim]
        pipeline.eval(_TAKE, len(claim), *lease.keys, _lease_ms(), lease.id, *caps)
    try:
        full = pipeline.execute()
    except (RedisError, OSError) as exc:
        logger.warning("stream_slots_unavailable", error=type(exc).__name__)  # the keys name clients: not logged
        return [Lease(keys=()) for _ in claims]
    return [lease if not at_cap else None for lease, at_cap in zip(leases, full, strict=True)]


def slots_renew(leases: list[Lease]) -> None:
    """The leases' slots held STREAM_LEASE_SECONDS more."""
    pairs = [(key, lease.id) for lease in leases for key in lease.keys]
    if not pairs:
        return
    try:
        shared_redis().eval(_RENEW, len(pairs), *(key for key, _ in pairs), _lease_ms(), *(i for _, i in pairs))
    except (RedisError, OSError) as exc:
        logger.warning("stream_slots_unavailable", error=type(exc).__name__)


def slots_release(leases: list[Lease]) -> None:
    """The leases' slots given back, in one pipelined round trip for all of them."""
    pipeline = shared_redis().pipeline(transaction=False)
    for lease in leases:
        for key in lease.keys:
            pipeline.zrem(key, lease.id)
    try:
        pipeline.execute()
    except (RedisError, OSError) as exc:  # the slots lapse by themselves
        logger.warning("stream_slots_unavailable", error=type(exc).__name__)


def _lease_ms() -> int:
    return int(settings.STREAM_LEASE_SECONDS * 1000)


def too_many_streams() -> JsonResponse:
    body = error_body("too_many_streams", "Too many streams open from here; close one and try again.")
    return JsonResponse(body, status=429, headers={"Retry-After": str(RETRY_AFTER_SECONDS)})


async def held_while_sent(content, lease: Lease):
    """`content`, a streaming response's body, with `lease` renewed while it is sent and given back when it
    ends: after its last chunk, when Django cancels or closes it because the client left, or on an error.
    The release survives a cancellation: it runs in a batch of its own (foundation.batching)."""
    _held.add(lease)
    try:
        async with contextlib.aclosing(content) as body:  # its own clean-up runs before ours
            async for chunk in body:
                yield chunk
    finally:
        _held.discard(lease)
        await _releases.run(lease)


def slot_give_back(lease: Lease) -> None:
    """Give back `lease` from the event loop without waiting for it, in the same batches as held_while_sent's
    releases (a stream refused or cancelled before it was sent)."""
    _releases.add(lease)


def _release_batch(leases: list[Lease]) -> list[None]:
    slots_release(leases)
    return [None] * len(leases)


_releases = Batches("stream-slot-releases", _release_batch)


class _HeldLeases:
    """The leases of the streams this process is sending, renewed together every STREAM_LEASE_SECONDS / 3 by
    one task on the event loop while there are any."""

    def __init__(self):
        self._leases: set[Lease] = set()
        self._renewer: asyncio.Task | None = None

    def add(self, lease: Lease) -> None:
        if not lease.keys:
            return
        self._leases.add(lease)
        loop = asyncio.get_running_loop()
        if self._renewer is None or self._renewer.done() or self._renewer.get_loop() is not loop:
            self._renewer = loop.create_task(self._renew(), name="stream-slot-renewals")

    def discard(self, lease: Lease) -> None:
        self._leases.discard(lease)

    async def _renew(self) -> None:
        while self._leases:
            await asyncio.sleep(settings.STREAM_LEASE_SECONDS / 3)
            if self._leases:
                await asyncio.to_thread(slots_renew, list(self._leases))


_held = _HeldLeases()
