"""Writes of email lead tracking: capture a parsed email as a lead, park it when the database fails,
poll a mailbox, schedule the polls.

The path of one message: parse → map to a store → upsert the lead on its
dedup key and, when it is complete, emit LeadCreated (one transaction for
a fetched batch; for each message alone when the batch's fails) → mark the
message \\Seen. When its own transaction fails, or the circuit breaker
on lead writes is open, the parsed lead is parked as a retry job instead and
the message is marked \\Seen all the same: it is durably captured either
way. If even parking fails, the message stays unseen and the next poll reads
it again; the dedup key makes that harmless.
"""

import time
import uuid
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta

import pybreaker
import structlog
from django.conf import settings
from django.core.cache import cache
from django.db import DatabaseError, InterfaceError, OperationalError, connection, transaction
from django.utils import timezone

import jobs
from crm.intake import lead_created_emit, lead_created_emit_many
from foundation.cache import shared_redis
from foundation.db import describe_db_error
from integrations.imap.client import FetchedMessage, ImapClient, MailboxSettings
from tracking.keys import (
    LEAD_RETRY_KIND,
    LEAD_RETRY_MAX_ATTEMPTS,
    LEAD_WRITE_BREAKER,
    POLL_KIND,
    POLL_MAX_ATTEMPTS,
    STORE_MAPPING_CACHE_KEY,
)
from tracking.leads import email_lead_upsert, email_leads_upsert
from tracking.parsing import (
    HEADER_MAX_BYTES,
    ParsedLeadEmail,
    headers_only,
    lead_dedup_key,
    parse_lead_email,
    sender_authentication,
)
from tracking.selectors import StoreMappings, imap_allowed_endpoints, store_mappings

logger = structlog.get_logger(__name__)

PROCESSED_BY = "imap-poller"
MESSAGE_ATTEMPTS_TTL = 7 * 24 * 3600


def lead_write_breaker() -> pybreaker.CircuitBreaker:
    """Shared by every poller and retry worker.

    Only a database that is unreachable or failing (OperationalError, InterfaceError: connection lost,
    timeouts, shutdown) counts as a failure; an error about the data of one email (DataError,
    IntegrityError) is that email's problem and must not pause everyone else's leads.
    """
    return jobs.circuit_breaker(
        LEAD_WRITE_BREAKER,
        fail_max=settings.LEAD_WRITE_BREAKER_FAIL_MAX,
        reset_timeout=settings.LEAD_WRITE_BREAKER_RESET_SECONDS,
        exclude=[lambda exc: not isinstance(exc, OperationalError | InterfaceError)],
    )


def lead_write_breaker_reopens_in() -> float:
    """Seconds until an open breaker lets a trial write through (0 when it already would)."""
    opened_at = jobs.circuit_opened_at(LEAD_WRITE_BREAKER)
    if opened_at is None:
        return 0.0
    reopens_at = opened_at + timedelta(seconds=settings.LEAD_WRITE_BREAKER_RESET_SECONDS)
    return max((reopens_at - datetime.now(UTC)).total_seconds(), 0.0)


def store_mapping_invalidate() -> None:
    """Drop the cached store mapping now, and again after commit.

    The second drop closes a race: another process could refill the cache from
    the database between the first drop and this transaction's commit.
    """
    cache.delete(STORE_MAPPING_CACHE_KEY)
    transaction.on_commit(lambda: cache.delete(STORE_MAPPING_CACHE_KEY))


# --- one message -----------------------------------------------------------------------------


def _lead_fields(parsed: ParsedLeadEmail, mapping, now) -> dict:
    return {
        "lead_type": parsed.lead_type,
        "first_name": parsed.first_name,
        "last_name": parsed.last_name,
        "email": parsed.email,
        "phone": parsed.phone,
        "email_subject": parsed.subject,
        "email_from": parsed.email_from,
        "email_recipient": parsed.email_recipient,
        "tracking_id": parsed.tracking_id,
        "raw_body": parsed.raw_body,
        "forwarded_original_from": parsed.forwarded_original_from,
        "forwarded_original_to": parsed.forwarded_original_to,
        "forwarded_original_date": parsed.forwarded_original_date,
        "parse_error": parsed.parse_error,
        "booked_date": parsed.booked_date,
        "booked_time": parsed.booked_time,
        "is_forwarded": parsed.is_forwarded,
        "received_at": parsed.received_at,
        "synced_at": now,
        "processed_by": PROCESSED_BY,
        "store_id": mapping.store_id if mapping else None,
        "franchise": mapping.franchise if mapping else "",
        "account_id": mapping.account_id if mapping else "",
    }


def email_lead_capture(*, parsed: ParsedLeadEmail, mappings: StoreMappings | None = None, reread: bool = False):
    """Write the lead (the upsert on its dedup key, tracking.leads) and emit LeadCreated when it is complete;
    one transaction.

    On a `reread` (a re-scan of seen messages) a message kept earlier as a failed
    parse, now understood by the parser, turns that failed lead into a parsed
    one. A poll passes the store mappings it read for the batch; otherwise
    they are read here.
    """
    if parsed.received_at is None:
        raise ValueError("a captured email needs its received time (the IMAP INTERNALDATE)")
    mapping = (mappings or store_mappings()).lookup(
        tracking_id=parsed.tracking_id, lead_emails=(parsed.email_from, parsed.forwarded_original_to)
    )
    reparse_key = None
    if reread and parsed.phone:  # a failed parse was kept under the key without a phone
        reparse_key = lead_dedup_key(email=parsed.email_from, phone="", received_at=parsed.received_at)
    with transaction.atomic():
        lead, complete = email_lead_upsert(
            dedup_key=parsed.dedup_key, fields=_lead_fields(parsed, mapping, timezone.now()), reparse_key=reparse_key
        )
        if complete:
            lead_created_emit(lead=lead)
    return lead


def email_leads_capture(*, parsed: list[ParsedLeadEmail], mappings: StoreMappings) -> None:
    """`email_lead_capture` for a batch of emails in one transaction: one INSERT for the new leads
    (tracking.leads.email_leads_upsert), one for the LeadCreated jobs of the complete ones."""
    if any(email.received_at is None for email in parsed):
        raise ValueError("a captured email needs its received time (the IMAP INTERNALDATE)")
    now = timezone.now()
    rows = [
        (email.dedup_key, _lead_fields(email, mappings.lookup(
            tracking_id=email.tracking_id, lead_emails=(email.email_from, email.forwarded_original_to)
        ), now))
        for email in parsed
    ]  # fmt: skip
    with transaction.atomic():
        leads = email_leads_upsert(rows)
        lead_created_emit_many(leads=[lead for lead, complete in leads if complete])


@dataclass(frozen=True)
class MessageSource:
    """Where a message came from, so a parked lead can be traced back to it."""

    mailbox: str
    uidvalidity: int
    uid: int

    @property
    def key(self) -> str:
        return f"{self.mailbox}:{self.uidvalidity}:{self.uid}"


def email_lead_park(*, parsed: ParsedLeadEmail, source: MessageSource, mappings: StoreMappings | None = None):
    """Keep a lead the database would not take as a retry job; the retry processor writes it later.

    The job is the only copy of the lead until then, so its payload is the parsed email; the job carries
    the lead's store, so only that store's staff (or staff who see every store) can read it.
    While the breaker is open the first attempt waits until it lets a trial
    write through; otherwise it waits LEAD_RETRY_DELAY_SECONDS.
    """
    delay = max(lead_write_breaker_reopens_in(), settings.LEAD_RETRY_DELAY_SECONDS)
    mapping = (mappings or store_mappings()).lookup(
        tracking_id=parsed.tracking_id, lead_emails=(parsed.email_from, parsed.forwarded_original_to)
    )
    with transaction.atomic():
        return jobs.enqueue(
            LEAD_RETRY_KIND,
            {"lead": parsed.to_json(), "source": source.key},
            key=f"{LEAD_RETRY_KIND}:{source.key}",
            run_after=timezone.now() + timedelta(seconds=delay),
            max_attempts=LEAD_RETRY_MAX_ATTEMPTS,
            store_id=mapping.store_id if mapping else None,
        )


def email_lead_retry(*, payload: dict):
    """The retry processor's write: the same capture as a poll, through the same breaker.

    Raises pybreaker.CircuitBreakerError while the breaker is open, or the database error.
    """
    parsed = ParsedLeadEmail.from_json(payload["lead"])
    return lead_write_breaker().call(email_lead_capture, parsed=parsed)


# --- one mailbox ---------------------------------------------------------------------------------


@dataclass
class PollResult:
    mailbox: str
    found: int = 0
    captured: int = 0
    failed_parse: int = 0
    parked: int = 0
    left_unseen: int = 0
    budget_exhausted: bool = False


def _attempts_key(source: MessageSource) -> str:
    """The message's attempt record in the shared Redis, under the cache's prefix and version."""
    return cache.make_key(f"tracking:message-attempts:{source.key}")


def message_attempts_clear(source: MessageSource) -> None:
    """A poll read the message to the end: polls that stopped on it before no longer count."""
    shared_redis().delete(_attempts_key(source))


def message_attempt_start(*, source: MessageSource, poll: str, finished: MessageSource | None = None) -> int:
    """Record that `poll` starts reading this message; shared by every worker. How many polls started on it and
    never finished, this one included.

    A poll that started over IMAP_MESSAGE_READ_SECONDS ago and is still on the message counts as never finishing
    (killed at its time limit, out of memory…). One that started since may still be reading it beside this one, and
    does not count: several polls reading one message at once must not take it for a message that stops polls.
    `finished`: the message this poll read just before, whose record is cleared in the same round trip.
    """
    key = _attempts_key(source)
    now = time.time()
    pipeline = shared_redis().pipeline(transaction=False)
    if finished is not None:
        pipeline.delete(_attempts_key(finished))
    pipeline.zcount(key, "-inf", now - settings.IMAP_MESSAGE_READ_SECONDS)
    pipeline.zadd(key, {poll: now})
    pipeline.expire(key, MESSAGE_ATTEMPTS_TTL)
    return pipeline.execute()[-3] + 1


def _message_parse(message: FetchedMessage, attempts: int) -> ParsedLeadEmail:
    """Parse a message, unless it is over the size limit or earlier polls never got past it (`attempts`: the
    polls started on it, this one included)."""
    if message.header_only:
        reason = (
            f"message too large: {message.size} bytes, over IMAP_MAX_MESSAGE_BYTES "
            f"({settings.IMAP_MAX_MESSAGE_BYTES}); its body was not fetched"
        )
        return headers_only(message.raw, received_at=message.internal_date, reason=reason)
    if attempts > settings.IMAP_MESSAGE_MAX_ATTEMPTS:
        reason = f"not parsed: {attempts - 1} earlier polls started on this message and never finished it"
        return headers_only(message.raw, received_at=message.internal_date, reason=reason)
    return parse_lead_email(
        message.raw, default_region=settings.PHONE_DEFAULT_REGION, received_at=message.internal_date
    )


def _sender_checked(parsed: ParsedLeadEmail, raw: bytes, mappings: StoreMappings) -> ParsedLeadEmail:
    """With IMAP_TRUSTED_AUTHSERV_ID set, a message that names a store must come from the store's domain as
    our receiving server authenticated it (DMARC or SPF pass); otherwise it is kept as a failed lead."""
    senders = (parsed.email_from, parsed.forwarded_original_to)
    mapping = mappings.lookup(tracking_id=parsed.tracking_id, lead_emails=senders)
    if mapping is None:
        return parsed  # no store: no outreach task comes of it anyway
    domain = mapping.sender_domain or parsed.email_from.rpartition("@")[2]
    auth = sender_authentication(raw, authserv_id=settings.IMAP_TRUSTED_AUTHSERV_ID)
    if auth.passes_for(domain):
        return parsed
    return replace(parsed, parse_error=f"sender not authenticated for {domain}: {auth.describe()}")


@dataclass(frozen=True)
class _ReadMessage:
    source: MessageSource
    parsed: ParsedLeadEmail


def _message_read(message: FetchedMessage, source: MessageSource, attempts: int, mappings) -> _ReadMessage:
    parsed = _message_parse(message, attempts)
    if settings.IMAP_TRUSTED_AUTHSERV_ID and not parsed.parse_error:
        parsed = _sender_checked(parsed, message.raw, mappings)
    return _ReadMessage(source, parsed)


def _messages_capture(read: list[_ReadMessage], breaker, mappings, result, *, reread) -> list[int]:
    """Capture read messages, or park them; the UIDs that may be marked \\Seen.

    Several at once are one write through the breaker (email_leads_capture). If
    that fails, each is written alone, so one message the database refuses
    leaves the others captured; what still fails is parked. A rescan (`reread`)
    writes each alone: a failed lead it now understands changes key.
    """
    done = []
    if len(read) > 1 and not reread:
        try:
            breaker.call(email_leads_capture, parsed=[item.parsed for item in read], mappings=mappings)
        except Exception as exc:  # database down, circuit open, one message the database refuses, or a bug
            log = logger.bind(mailbox=read[0].source.mailbox, uids=[item.source.uid for item in read])
            log.warning("lead_batch_write_failed", error=describe_db_error(exc))
            connection.close_if_unusable_or_obsolete()
        else:
            result.captured += len(read)
            result.failed_parse += sum(bool(item.parsed.parse_error) for item in read)
            done = read
    if not done:
        done = [item for item in read if _message_capture(item, breaker, mappings, result, reread=reread)]
    return [item.source.uid for item in done]


def _message_capture(item: _ReadMessage, breaker, mappings, result, *, reread) -> bool:
    """Capture one message, or park it; True when it may be marked \\Seen."""
    parsed, source = item.parsed, item.source
    log = logger.bind(mailbox=source.mailbox, uid=source.uid)
    try:
        breaker.call(email_lead_capture, parsed=parsed, mappings=mappings, reread=reread)
    except Exception as exc:  # database down, circuit open, or a bug: the retry job keeps the lead either way
        log.warning("lead_write_failed", error=describe_db_error(exc))
        # A dropped connection stays broken inside this process until it is closed.
        connection.close_if_unusable_or_obsolete()
    else:
        result.captured += 1
        result.failed_parse += bool(parsed.parse_error)
        return True
    try:
        email_lead_park(parsed=parsed, source=source, mappings=mappings)
    except DatabaseError as exc:
        log.error("lead_park_failed", error=describe_db_error(exc))
        connection.close_if_unusable_or_obsolete()
        result.left_unseen += 1
        return False
    result.parked += 1
    return True


def _batch_capture(
    client: ImapClient, messages: list[FetchedMessage], breaker, result, *, poll: str, reread: bool
) -> list[int]:
    """Read and capture one fetched batch; the UIDs that may be marked \\Seen.

    Each message's read (parse, sender check) is recorded before it starts and
    cleared once it is done (message_attempt_start), so a message that stops
    every poll reading it is parked as a failed lead after
    IMAP_MESSAGE_MAX_ATTEMPTS, alone.
    """
    mappings = store_mappings()
    read, finished = [], None
    for message in messages:
        source = MessageSource(client.mailbox.name, client.uidvalidity, message.uid)
        attempts = 0
        if not message.header_only:  # a header-only read is bounded by its fetch: not counted
            attempts, finished = message_attempt_start(source=source, poll=poll, finished=finished), source
        read.append(_message_read(message, source, attempts, mappings))
    if finished is not None:
        message_attempts_clear(finished)
    return _messages_capture(read, breaker, mappings, result, reread=reread)


def mailbox_poll(
    *,
    mailbox: MailboxSettings,
    since: date | None = None,
    include_seen: bool = False,
    time_budget: float | None = None,
) -> PollResult:
    """Read a mailbox's unseen messages (or all, with `include_seen`) in UID batches and capture each.

    A message is marked \\Seen only once its lead is saved or parked. One
    transaction per batch (_batch_capture). With a `time_budget` (seconds) it stops between
    batches once the budget is spent; the next poll goes on from there.
    """
    started = time.monotonic()
    poll = uuid.uuid4().hex  # this poll, in the messages' attempt records
    result = PollResult(mailbox=mailbox.name)
    breaker = lead_write_breaker()
    client = ImapClient(
        mailbox, timeout=settings.IMAP_TIMEOUT_SECONDS, ca_file=settings.IMAP_CA_FILE, allowed=imap_allowed_endpoints()
    )
    with client:
        uids = client.search(include_seen=include_seen, since=since)
        result.found = len(uids)
        for start in range(0, len(uids), settings.IMAP_FETCH_BATCH):
            if time_budget is not None and time.monotonic() - started > time_budget:
                result.budget_exhausted = True
                break
            messages = client.fetch(
                uids[start : start + settings.IMAP_FETCH_BATCH],
                max_bytes=settings.IMAP_MAX_MESSAGE_BYTES,
                header_max_bytes=HEADER_MAX_BYTES,
            )
            seen = _batch_capture(client, messages, breaker, result, poll=poll, reread=include_seen)
            if seen:
                client.mark_seen(seen)
    logger.info(
        "mailbox_polled",
        mailbox=result.mailbox,
        found=result.found,
        captured=result.captured,
        failed_parse=result.failed_parse,
        parked=result.parked,
        left_unseen=result.left_unseen,
        budget_exhausted=result.budget_exhausted,
        duration_ms=int((time.monotonic() - started) * 1000),
    )
    return result


def mailbox_polls_enqueue(*, mailbox_names: list[str]):
    """A poll job per mailbox, unless one is still pending or running (a slow poll is never doubled)."""
    enqueued = []
    stamp = timezone.now().strftime("%Y%m%dT%H%M%S")
    for name in mailbox_names:
        prefix = f"{POLL_KIND}:{name}:"
        with transaction.atomic():
            if jobs.has_unfinished(prefix):
                continue
            enqueued.append(
                jobs.enqueue(POLL_KIND, {"mailbox": name}, key=f"{prefix}{stamp}", max_attempts=POLL_MAX_ATTEMPTS)
            )
    return enqueued
