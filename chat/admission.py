"""Whether a chat message may open an answer's stream: its rate limits and stream caps, in one round trip to
Redis from the event loop.

The same counters and slots as foundation.throttling's windows and foundation.streams' leases (the same keys, so
foundation.streams renews and gives back the slots taken here), in one Lua script: the message counted against
its session's allowance, then (if allowed) its IP's, then a slot taken under its session and its IP, or none.
The view awaits it on the event loop (redis-py's asyncio client), the scripts of the chats starting together
in one pipeline: three round trips from a worker thread cost far more than the commands, each a hand-over of
the GIL that waits on a busy event loop (bench/chat).

When Redis cannot be reached the message is let through and a warning is logged, as the throttles and the
stream caps do.
"""

import asyncio
import hashlib
import time

import redis.asyncio
import structlog
from django.conf import settings
from django.core.cache import cache
from redis.exceptions import NoScriptError, RedisError

from foundation.client_ip import address_bucket
from foundation.streams import Lease
from foundation.throttling import parse_rate

logger = structlog.get_logger(__name__)

# KEYS: the session's counter, the IP's counter (when the IP is known), then the slot keys. ARGV: the session's
# limit and window (s), the IP's limit and window ('' when unknown), the lease (ms), the stream's id, each slot
# key's cap. 0: admitted, the slots taken; 1 or 2: the session's or the IP's allowance spent (the IP's not
# counted after the session's is spent); 3: a slot key at its cap. The slots as foundation.streams' _TAKE takes them.
_ADMIT = """
local count = redis.call('INCR', KEYS[1])
redis.call('EXPIRE', KEYS[1], ARGV[2])
if count > tonumber(ARGV[1]) then return 1 end
local first_slot = 2
if ARGV[3] ~= '' then
  count = redis.call('INCR', KEYS[2])
  redis.call('EXPIRE', KEYS[2], ARGV[4])
  if count > tonumber(ARGV[3]) then return 2 end
  first_slot = 3
end
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local lease_ms = tonumber(ARGV[5])
for i = first_slot, #KEYS do
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now_ms)
  if redis.call('ZCARD', KEYS[i]) >= tonumber(ARGV[i - first_slot + 7]) then return 3 end
end
for i = first_slot, #KEYS do
  redis.call('ZADD', KEYS[i], now_ms + lease_ms, ARGV[6])
  redis.call('PEXPIRE', KEYS[i], lease_ms)
end
return 0
"""


class _Admissions:
    """The admissions asked for while the previous ones are in Redis, sent together: one pipeline, one round
    trip. A call each would cost more than its script: redis-py's asyncio pool checks a connection out (and
    checks it) and back in per command, about a millisecond of the event loop's time a call when a hundred
    chats start at once (bench/chat).

    An asyncio client is bound to the event loop it connects on: one for the running loop, which in daphne is
    the same for the process's lifetime (tests run a loop per request: each replaces the last one's).
    """

    def __init__(self, loop: asyncio.AbstractEventLoop):
        config = settings.CACHES["default"]
        max_connections = config.get("OPTIONS", {}).get("max_connections")
        options = {"max_connections": max_connections} if max_connections else {}  # as foundation.cache's pool
        self.loop = loop
        self.client = redis.asyncio.Redis.from_url(config["LOCATION"], **options)
        self.sha = hashlib.sha1(_ADMIT.encode()).hexdigest()
        self.pending: list[tuple[list, list, asyncio.Future]] = []
        self.sending: asyncio.Task | None = None

    def admit(self, keys: list, args: list) -> asyncio.Future:
        future = self.loop.create_future()
        self.pending.append((keys, args, future))
        if self.sending is None or self.sending.done():
            self.sending = self.loop.create_task(self._send(), name="chat-admissions")
        return future

    async def _send(self) -> None:
        while self.pending:
            batch, self.pending = self.pending, []
            try:
                outcomes = await self._run([(keys, args) for keys, args, _ in batch])
            except (RedisError, OSError) as exc:
                outcomes = [exc] * len(batch)
            for (_, _, future), outcome in zip(batch, outcomes, strict=True):
                if future.done():  # its caller went away
                    continue
                if isinstance(outcome, Exception):
                    future.set_exception(outcome)
                else:
                    future.set_result(outcome)

    async def _run(self, calls: list[tuple[list, list]], *, loaded: bool = False) -> list:
        async with self.client.pipeline(transaction=False) as pipeline:
            for keys, args in calls:
                pipeline.evalsha(self.sha, len(keys), *keys, *args)
            outcomes = await pipeline.execute(raise_on_error=False)
        unknown = [n for n, outcome in enumerate(outcomes) if isinstance(outcome, NoScriptError)]
        if unknown and not loaded:  # the first batch, or Redis restarted: load the script, then run those again
            await self.client.script_load(_ADMIT)
            again = await self._run([calls[n] for n in unknown], loaded=True)
            for n, outcome in zip(unknown, again, strict=True):
                outcomes[n] = outcome
        return outcomes


_admissions: _Admissions | None = None


def _for_this_loop() -> _Admissions:
    global _admissions
    loop = asyncio.get_running_loop()
    if _admissions is None or _admissions.loop is not loop:
        _admissions = _Admissions(loop)
    return _admissions


async def stream_admit(*, session_id: str, ip: str | None) -> tuple[int | None, Lease | None]:
    """(seconds to wait, None) when the session's or the IP's allowance is spent, (None, None) when its session
    or its IP already streams as many answers as they may, else (None, the stream's lease)."""
    now = time.time()
    counters, args = [], []
    for scope, who, rate in (
        ("session", session_id, settings.CHAT_STREAM_RATE_PER_SESSION),
        ("ip", ip, settings.CHAT_STREAM_RATE_PER_IP),
    ):
        limit, duration = parse_rate(rate)
        window = int(now // duration)
        if who is not None:
            counters.append((cache.make_key(f"chat:stream:{scope}:{who}:{window}"), (window + 1) * duration - now))
        args += [limit, duration] if who is not None else ["", ""]
    claim = [
        (f"chat:session:{session_id}", settings.STREAMS_PER_CHAT_SESSION),
        (f"chat:ip:{address_bucket(ip) if ip is not None else 'unknown'}", settings.STREAMS_PER_IP),
    ]
    lease = Lease(keys=tuple(cache.make_key(f"streams:{key}") for key, cap in claim if cap > 0))
    args += [int(settings.STREAM_LEASE_SECONDS * 1000), lease.id, *(cap for _, cap in claim if cap > 0)]
    try:
        outcome = await _for_this_loop().admit([key for key, _ in counters] + list(lease.keys), args)
    except (RedisError, OSError) as exc:  # the keys name clients: not logged
        logger.warning("throttle_unavailable", error=type(exc).__name__)
        return None, Lease(keys=())
    if outcome in (1, 2):
        return int(counters[outcome - 1][1]) + 1, None
    return None, (lease if outcome == 0 else None)
