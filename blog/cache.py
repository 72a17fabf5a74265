"""The posts cache: read-through, generation-keyed, stampede-protected, stale-if-error.

Built on Django's cache API (Redis): get, get_many, set, add, incr, delete; the read of every request goes
through the process's shared redis-py client instead (one MGET, the values decoded as Django's cache stores them).

- Every entry key carries the current generation (`blog:generation`); a purge
  increments it, so every entry written before is unreachable at once, one
  write whatever the number of keys. Old entries age out by their own expiry.
  A generation that is lost (evicted, flushed) restarts from the clock in
  milliseconds, above any value it had before, so old entries never come back.
- An entry is fresh for BLOG_CACHE_TTL_SECONDS and kept BLOG_STALE_SECONDS
  longer as the last good copy, served (`stale`) only when WordPress fails.
- Concurrent misses of one key, in any number of processes, make one upstream
  call: the first takes a short lock with `add`, the others poll for its entry.
  A failed call leaves a short failure mark, so a WordPress that is down or slow
  is asked again after FAILURE_BACKOFF_SECONDS, not by every waiting request.
- Entries hold the answer as served (JSON bytes, status, headers, ETag), so a hit
  costs one cache round trip (the generation and the entry in one MGET) and
  no serialization.

Outcome counters (hit, miss, stale, bypass) are added up in each process and
written to the cache at most once a second: one write per answer would double
a hit's cache round trips for a figure that only the admin page reads.
"""

import hashlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import redis
import structlog
from django.conf import settings
from django.core.cache import cache
from django.core.cache.backends.redis import RedisSerializer
from django.utils.http import parse_etags

from foundation.cache import shared_redis

logger = structlog.get_logger(__name__)

GENERATION_KEY = "blog:generation"
OUTCOMES = ("hit", "miss", "stale", "bypass")
COUNTER_PREFIX = "blog:count:"
FAILURE_BACKOFF_SECONDS = 5
POLL_FIRST_SECONDS = 0.01
POLL_MAX_SECONDS = 0.1
COUNTER_FLUSH_SECONDS = 1.0

# What the cache raises when Redis cannot be reached.
CACHE_ERRORS = (redis.RedisError,)

_known_generation: int | None = None  # the generation this process saw last (read_through checks it)


class UpstreamFailed(Exception):
    """The fetch could not get an answer from WordPress (down, slow, or answering nonsense)."""


@dataclass(frozen=True)
class Entry:
    status: int  # 200, or 404 for a page or post that does not exist
    body: bytes  # the JSON answer as served
    headers: tuple[tuple[str, str], ...]
    etag: str
    stored_at: float  # time.time()

    def matches(self, if_none_match: str | None) -> bool:
        """Whether a request's If-None-Match names this entry (the weak comparison GET uses)."""
        if not if_none_match:
            return False
        tags = parse_etags(if_none_match)
        return "*" in tags or self.etag in tags or f"W/{self.etag}" in tags


@dataclass(frozen=True)
class Answer:
    outcome: str  # one of OUTCOMES
    entry: Entry | None  # None: nothing to serve (WordPress failed and there is no copy)


Fetch = Callable[[], tuple[int, bytes, tuple[tuple[str, str], ...]]]


def read_through(name: str, fetch: Fetch, *, refresh: bool = False, admit: Callable[[], None] | None = None) -> Answer:
    """The cached answer for `name` (a canonical description of the request), fetched on a miss.

    `fetch` returns (status, body, headers) or raises UpstreamFailed. `refresh` skips the cache
    read and stores what WordPress answers now. `admit`, if given, runs before a request that
    the cache cannot answer goes further (it raises to refuse it)."""
    try:
        return _read_through(name, fetch, refresh=refresh, admit=admit)
    except CACHE_ERRORS as exc:
        # Redis is down: WordPress answers directly, one call per request, rather than every visitor getting a 500.
        logger.warning("blog_cache_unavailable", error=type(exc).__name__)
        try:
            return Answer("miss", _entry(*fetch()))
        except UpstreamFailed:
            return Answer("miss", None)


def cached(name: str) -> Answer | None:
    """The `hit` for `name` if the cache holds a fresh entry for it, else None (read_through answers then).
    Raises CACHE_ERRORS when Redis cannot be reached."""
    _, entry, _ = _read(name)
    if entry is not None and _fresh(entry):
        return _count(Answer("hit", entry))
    return None


def _read_through(name: str, fetch: Fetch, *, refresh: bool, admit: Callable[[], None] | None) -> Answer:
    keys, entry, failed = _read(name)
    if refresh:
        if admit:
            admit()
        return _fetch_and_store(keys, fetch, "bypass", fallback=entry)
    if entry is not None and _fresh(entry):
        return _count(Answer("hit", entry))
    if failed:
        return _fallback(entry)
    if admit:
        admit()
    return _miss(keys, fetch, entry)


def _read(name: str):
    """The keys, entry and failure mark of `name` in the current generation: one cache round trip.

    The generation is read in the same get_many as the entry of the generation this process saw
    last; only when a purge has changed it since is the entry read again under the new one."""
    global _known_generation
    guess = _known_generation
    keys = _Keys.of(name, guess)
    generation, entry, failed = _get_many([GENERATION_KEY, keys.entry, keys.failed])
    if generation is None or generation != guess:
        _known_generation = generation = generation if generation is not None else current_generation()
        keys = _Keys.of(name, generation)
        entry, failed = _get_many([keys.entry, keys.failed])
    return keys, entry, failed


_serializer = RedisSerializer()


def _get_many(keys: list[str]) -> list:
    """The values of `keys` (None where missing), as cache.get_many reads them, in one MGET on the process's
    shared client: Django's cache builds a redis-py client (some 200 response callbacks) for every call,
    about half of a hit's CPU in the view (bench/blog)."""
    values = shared_redis().mget([cache.make_key(key) for key in keys])
    return [None if value is None else _serializer.loads(value) for value in values]


def current_generation() -> int:
    generation = cache.get(GENERATION_KEY)
    if generation is None:
        cache.add(GENERATION_KEY, _clock_generation(), timeout=None)
        generation = cache.get(GENERATION_KEY)
    return generation


def generation_advance() -> tuple[int, int]:
    """Make every entry unreachable: (previous generation, new generation)."""
    new = _incr_forever(GENERATION_KEY, 1, start=_clock_generation())
    return new - 1, new


def outcome_counts() -> dict[str, int]:
    """Answers per outcome since the counters started, this process's pending counts included."""
    _counters.flush(force=True)
    stored = cache.get_many([COUNTER_PREFIX + outcome for outcome in OUTCOMES])
    return {outcome: int(stored.get(COUNTER_PREFIX + outcome, 0)) for outcome in OUTCOMES}


# --- the miss path ---------------------------------------------------------------------------------


def entry_key(name: str, generation: int) -> str:
    """The cache key of the answer for `name` in `generation`."""
    return _Keys.of(name, generation).entry


@dataclass(frozen=True)
class _Keys:
    entry: str
    lock: str
    failed: str

    @classmethod
    def of(cls, name: str, generation: int) -> "_Keys":
        digest = hashlib.blake2b(name.encode(), digest_size=16).hexdigest()
        return cls(f"blog:entry:{generation}:{digest}", f"blog:lock:{generation}:{digest}",
                   f"blog:failed:{generation}:{digest}")  # fmt: skip


def _miss(keys: _Keys, fetch: Fetch, entry: Entry | None) -> Answer:
    lock_seconds = settings.WORDPRESS_TIMEOUT_SECONDS * 2 + 1  # the fetch's longest time (client.py), and some
    deadline = time.monotonic() + lock_seconds
    pause = POLL_FIRST_SECONDS
    while True:
        if cache.add(keys.lock, 1, timeout=int(lock_seconds) + 1):
            try:
                # The previous holder may have stored the entry, or failed, and let go since this
                # request last looked: either way it must not call WordPress again.
                found = cache.get_many([keys.entry, keys.failed])
                current = found.get(keys.entry)
                if current is not None and _fresh(current):
                    return _count(Answer("hit", current))
                if found.get(keys.failed):
                    return _fallback(current or entry)
                return _fetch_and_store(keys, fetch, "miss", fallback=current or entry)
            finally:
                cache.delete(keys.lock)
        time.sleep(pause)
        pause = min(pause * 1.5, POLL_MAX_SECONDS)
        found = cache.get_many([keys.entry, keys.lock, keys.failed])
        current = found.get(keys.entry)
        if current is not None and _fresh(current):
            return _count(Answer("hit", current))
        entry = current or entry
        if found.get(keys.failed) or time.monotonic() > deadline:
            return _fallback(entry)
        # The lock is gone with no fresh entry (its holder died): the next round tries to take it.


def _fetch_and_store(keys: _Keys, fetch: Fetch, outcome: str, *, fallback: Entry | None) -> Answer:
    try:
        status, body, headers = fetch()
    except UpstreamFailed:
        cache.set(keys.failed, 1, timeout=FAILURE_BACKOFF_SECONDS)
        return _fallback(fallback)
    entry = _entry(status, body, headers)
    cache.set(keys.entry, entry, timeout=settings.BLOG_CACHE_TTL_SECONDS + settings.BLOG_STALE_SECONDS)
    cache.delete(keys.failed)
    return _count(Answer(outcome, entry))


def _entry(status: int, body: bytes, headers) -> Entry:
    etag = '"' + hashlib.blake2b(body, digest_size=16).hexdigest() + '"'
    return Entry(status=status, body=body, headers=headers, etag=etag, stored_at=time.time())


def _fallback(entry: Entry | None) -> Answer:
    """The last good copy, if it is still within the stale window."""
    kept_for = settings.BLOG_CACHE_TTL_SECONDS + settings.BLOG_STALE_SECONDS
    if entry is not None and time.time() - entry.stored_at < kept_for:
        return _count(Answer("stale", entry))
    return _count(Answer("miss", None))


def _fresh(entry: Entry) -> bool:
    return time.time() - entry.stored_at < settings.BLOG_CACHE_TTL_SECONDS


def _clock_generation() -> int:
    return int(time.time() * 1000)


def _incr_forever(key: str, delta: int, *, start: int) -> int:
    """Add `delta` to a counter that never expires, creating it at `start` if it is missing."""
    cache.add(key, start, timeout=None)
    try:
        return cache.incr(key, delta)  # Redis's INCR leaves the key without an expiry
    except ValueError:  # removed between the two calls
        cache.add(key, start + delta, timeout=None)
        return start + delta


# --- counters ------------------------------------------------------------------------------------


class _Counters:
    def __init__(self):
        self._lock = threading.Lock()
        self._pending = dict.fromkeys(OUTCOMES, 0)
        self._flushed_at = time.monotonic()

    def add(self, outcome: str):
        with self._lock:
            self._pending[outcome] += 1
        self.flush()

    def flush(self, *, force=False):
        with self._lock:
            if not force and time.monotonic() - self._flushed_at < COUNTER_FLUSH_SECONDS:
                return
            pending, self._pending = self._pending, dict.fromkeys(OUTCOMES, 0)
            self._flushed_at = time.monotonic()
        try:
            for outcome, count in pending.items():
                if count:
                    _incr_forever(COUNTER_PREFIX + outcome, count, start=0)
        except CACHE_ERRORS as exc:  # figures for the admin page: never worth failing an answer for
            logger.warning("blog_counters_not_written", error=type(exc).__name__)


_counters = _Counters()


def _count(answer: Answer) -> Answer:
    _counters.add(answer.outcome)
    return answer
