"""Whether chat messages may open an answer's stream: their rate limits and stream caps, in one round trip to
Redis for all the chats starting together.

The same counters and slots as foundation.throttling's windows and foundation.streams' leases (the same keys, so
foundation.streams renews and gives back the slots taken here), in one Lua script per chat: the message counted
against its session's allowance, then (if allowed) its IP's, then a slot taken under its session and its IP, or
none. The scripts of a batch go in one pipeline, sent from the thread that then writes the admitted turns
(chat.api): one trip to a thread for both, where a trip each, on an event loop busy with a hundred chats
starting, costs far more than the commands (bench/chat).

When Redis cannot be reached the message is let through and a warning is logged, as the throttles and the
stream caps do.
"""

import hashlib
import time
from dataclasses import dataclass

import structlog
from django.conf import settings
from django.core.cache import cache
from redis.exceptions import NoScriptError, RedisError

from foundation.cache import shared_redis
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


_ADMIT_SHA = hashlib.sha1(_ADMIT.encode()).hexdigest()


@dataclass(frozen=True)
class Admission:
    """One message's script call, worked out on the event loop; `windows`: the seconds left in each counter's
    window (the Retry-After of a spent allowance)."""

    keys: list[str]
    args: list
    windows: list[float]
    lease: Lease


def admission_for(*, session_id: str, ip: str | None) -> Admission:
    now = time.time()
    counters, windows, args = [], [], []
    for scope, who, rate in (
        ("session", session_id, settings.CHAT_STREAM_RATE_PER_SESSION),
        ("ip", ip, settings.CHAT_STREAM_RATE_PER_IP),
    ):
        limit, duration = parse_rate(rate)
        window = int(now // duration)
        if who is not None:
            counters.append(cache.make_key(f"chat:stream:{scope}:{who}:{window}"))
            windows.append((window + 1) * duration - now)
        args += [limit, duration] if who is not None else ["", ""]
    claim = [
        (f"chat:session:{session_id}", settings.STREAMS_PER_CHAT_SESSION),
        (f"chat:ip:{address_bucket(ip) if ip is not None else 'unknown'}", settings.STREAMS_PER_IP),
    ]
    lease = Lease(keys=tuple(cache.make_key(f"streams:{key}") for key, cap in claim if cap > 0))
    args += [int(settings.STREAM_LEASE_SECONDS * 1000), lease.id, *(cap for _, cap in claim if cap > 0)]
    return Admission(counters + list(lease.keys), args, windows, lease)


def admissions_run(admissions: list[Admission]) -> list[tuple[int | None, Lease | None]]:
    """For each admission, in one pipelined round trip: (seconds to wait, None) when the session's or the IP's
    allowance is spent, (None, None) when its session or its IP already streams as many answers as they may,
    else (None, the stream's lease)."""
    try:
        outcomes = _run(admissions)
    except (RedisError, OSError) as exc:
        outcomes = [exc] * len(admissions)
    results = []
    for admission, outcome in zip(admissions, outcomes, strict=True):
        if isinstance(outcome, Exception):  # the keys name clients: not logged
            logger.warning("throttle_unavailable", error=type(outcome).__name__)
            results.append((None, Lease(keys=())))
        elif outcome in (1, 2):
            results.append((int(admission.windows[outcome - 1]) + 1, None))
        else:
            results.append((None, admission.lease if outcome == 0 else None))
    return results


def _run(admissions: list[Admission], *, loaded: bool = False) -> list:
    pipeline = shared_redis().pipeline(transaction=False)
    for admission in admissions:
        pipeline.evalsha(_ADMIT_SHA, len(admission.keys), *admission.keys, *admission.args)
    outcomes = pipeline.execute(raise_on_error=False)
    unknown = [n for n, outcome in enumerate(outcomes) if isinstance(outcome, NoScriptError)]
    if unknown and not loaded:  # the first batch, or Redis restarted: load the script, then run those again
        shared_redis().script_load(_ADMIT)
        again = _run([admissions[n] for n in unknown], loaded=True)
        for n, outcome in zip(unknown, again, strict=True):
            outcomes[n] = outcome
    return outcomes
