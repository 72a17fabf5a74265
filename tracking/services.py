"""Writes of email lead tracking: capture a parsed email as a lead, park it when the database fails,
poll a mailbox, schedule the polls.

The path of one message: parse → map to a store → upsert the lead on its
dedup key and, when it is complete, emit LeadCreated (one transaction) →
mark the message \\Seen. When that transaction fails, or the circuit breaker
on lead writes is open, the parsed lead is parked as a retry job instead and
the message is marked \\Seen all the same: it is durably captured either
way. If even parking fails, the message stays unseen and the next poll reads
it again; the dedup key makes that harmless.
"""

import time
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

import pybreaker
import structlog
from django.conf import settings
from django.core.cache import cache
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

import jobs
from config.db import insert_on_conflict
from crm.events import lead_created_emit
from integrations.imap import FetchedMessage, ImapClient, MailboxSettings
from jobs.breaker import CacheCircuitStorage, circuit_breaker
from jobs.models import Job
from jobs.selectors import jobs_for_key_prefix
from leadgen.models import Lead
from tracking.db import describe_db_error
from tracking.parsing import ParsedLeadEmail, lead_dedup_key, parse_lead_email
from tracking.selectors import STORE_MAPPING_CACHE_KEY, StoreMappings, store_mappings

logger = structlog.get_logger(__name__)

POLL_KIND = "tracking.poll_mailbox"
LEAD_RETRY_KIND = "tracking.lead_retry"
LEAD_WRITE_BREAKER = "tracking.lead_write"
PROCESSED_BY = "imap-poller"


def lead_write_breaker() -> pybreaker.CircuitBreaker:
    """Shared by every poller and retry worker. Only database errors count as failures."""
    return circuit_breaker(
        LEAD_WRITE_BREAKER,
        fail_max=settings.LEAD_WRITE_BREAKER_FAIL_MAX,
        reset_timeout=settings.LEAD_WRITE_BREAKER_RESET_SECONDS,
        exclude=[lambda exc: not isinstance(exc, DatabaseError)],
    )


def lead_write_breaker_reopens_in() -> float:
    """Seconds until an open breaker lets a trial write through (0 when it already would)."""
    opened_at = CacheCircuitStorage(LEAD_WRITE_BREAKER).opened_at
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
    texts = {
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
    }
    # An email may carry any length of text; the row keeps what fits rather than failing the write.
    texts = {name: value[: Lead._meta.get_field(name).max_length] for name, value in texts.items()}
    return {
        **texts,
        "channel": Lead.Channel.EMAIL,
        "booked_date": parsed.booked_date,
        "booked_time": parsed.booked_time,
        "is_forwarded": parsed.is_forwarded,
        "received_at": parsed.received_at,
        "synced_at": now,
        "parse_state": Lead.ParseState.FAILED if parsed.parse_error else Lead.ParseState.PARSED,
        "processed_by": PROCESSED_BY,
        "store_id": mapping.store_id if mapping else None,
        "franchise": mapping.franchise if mapping else "",
        "account_id": mapping.account_id if mapping else "",
    }


def _lead_on_conflict(lead: Lead, parsed: ParsedLeadEmail, mapping, now) -> None:
    """A second sighting of the same lead: refresh its type and store mapping, keep everything else.

    The store is forward-only: a known store is never replaced, by null or by
    another store, because contacts and tasks downstream are keyed on it. The
    franchise and account follow the mapping only while it names the same
    store (a corrected Store row), so they always describe the lead's store.
    """
    if parsed.lead_type:
        lead.lead_type = parsed.lead_type
    if mapping and lead.store_id in (None, mapping.store_id):
        lead.store_id, lead.franchise, lead.account_id = mapping.store_id, mapping.franchise, mapping.account_id
    lead.synced_at = now
    lead.save(update_fields=["lead_type", "store", "franchise", "account_id", "synced_at", "updated_at"])


def email_lead_capture(*, parsed: ParsedLeadEmail, mappings: StoreMappings | None = None, reread: bool = False) -> Lead:
    """Upsert the lead on its dedup key and emit LeadCreated when it is complete; one transaction.

    Reprocessing the same message any number of times leaves one lead. On a
    `reread` (a re-scan of seen messages) a message kept earlier as a failed
    parse, now understood by the parser, turns that failed lead into a parsed
    one. A poll passes the store mappings it read for the batch; otherwise
    they are read here.
    """
    if parsed.received_at is None:
        raise ValueError("a captured email needs its received time (the IMAP INTERNALDATE)")
    key = parsed.dedup_key
    mapping = (mappings or store_mappings()).lookup(
        tracking_id=parsed.tracking_id, lead_emails=(parsed.email_from, parsed.forwarded_original_to)
    )
    now = timezone.now()
    fields = _lead_fields(parsed, mapping, now)
    with transaction.atomic():
        failed = _failed_lead_to_reparse(parsed) if reread and not parsed.parse_error else None
        if failed is not None:
            lead = _lead_overwrite(failed, {"dedup_key": key, **fields})
        else:
            lead = Lead(dedup_key=key, **fields)
            inserted = insert_on_conflict(lead, on_conflict="ON CONFLICT (dedup_key) DO NOTHING", returning="id")
            if inserted:
                lead.pk, lead._state.adding = inserted[0], False
            else:
                lead = Lead.objects.select_for_update().get(dedup_key=key)
                if lead.parse_state == Lead.ParseState.FAILED and not parsed.parse_error:
                    _lead_overwrite(lead, fields)
                else:
                    _lead_on_conflict(lead, parsed, mapping, now)
        if lead.parse_state == Lead.ParseState.PARSED:
            lead_created_emit(lead=lead)
    return lead


def _lead_overwrite(lead: Lead, fields: dict) -> Lead:
    """A failed parse, now understood: everything the email says replaces what was kept."""
    for name, value in fields.items():
        setattr(lead, name, value)
    lead.save()
    return lead


def _failed_lead_to_reparse(parsed: ParsedLeadEmail) -> Lead | None:
    """The failed lead this message left when the parser did not understand it (kept under its no-phone key)."""
    if not parsed.phone:
        return None  # same key as before: the insert below finds it
    failed_key = lead_dedup_key(email=parsed.email_from, phone="", received_at=parsed.received_at)
    if Lead.objects.filter(dedup_key=parsed.dedup_key).exists():
        return None
    return Lead.objects.select_for_update().filter(dedup_key=failed_key, parse_state=Lead.ParseState.FAILED).first()


@dataclass(frozen=True)
class MessageSource:
    """Where a message came from, so a parked lead can be traced back to it."""

    mailbox: str
    uidvalidity: int
    uid: int

    @property
    def key(self) -> str:
        return f"{self.mailbox}:{self.uidvalidity}:{self.uid}"


def email_lead_park(*, parsed: ParsedLeadEmail, source: MessageSource) -> Job:
    """Keep a lead the database would not take as a retry job; the retry processor writes it later.

    While the breaker is open the first attempt waits until it lets a trial
    write through; otherwise it waits LEAD_RETRY_DELAY_SECONDS.
    """
    delay = max(lead_write_breaker_reopens_in(), settings.LEAD_RETRY_DELAY_SECONDS)
    with transaction.atomic():
        return jobs.enqueue(
            LEAD_RETRY_KIND,
            {"lead": parsed.to_json(), "source": source.key},
            key=f"{LEAD_RETRY_KIND}:{source.key}",
            run_after=timezone.now() + timedelta(seconds=delay),
            max_attempts=settings.LEAD_RETRY_MAX_ATTEMPTS,
        )


def email_lead_retry(*, payload: dict) -> Lead:
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


def _message_capture(message: FetchedMessage, source: MessageSource, breaker, mappings, result, *, reread) -> bool:
    """Capture one message, or park it; True when it may be marked \\Seen."""
    parsed = parse_lead_email(
        message.raw, default_region=settings.PHONE_DEFAULT_REGION, received_at=message.internal_date
    )
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
        email_lead_park(parsed=parsed, source=source)
    except DatabaseError as exc:
        log.error("lead_park_failed", error=describe_db_error(exc))
        connection.close_if_unusable_or_obsolete()
        result.left_unseen += 1
        return False
    result.parked += 1
    return True


def mailbox_poll(
    *,
    mailbox: MailboxSettings,
    since: date | None = None,
    include_seen: bool = False,
    time_budget: float | None = None,
) -> PollResult:
    """Read a mailbox's unseen messages (or all, with `include_seen`) in UID batches and capture each.

    A message is marked \\Seen only once its lead is saved or parked. One
    transaction per message. With a `time_budget` (seconds) it stops between
    batches once the budget is spent; the next poll goes on from there.
    """
    started = time.monotonic()
    result = PollResult(mailbox=mailbox.name)
    breaker = lead_write_breaker()
    with ImapClient(mailbox, timeout=settings.IMAP_TIMEOUT_SECONDS, ca_file=settings.IMAP_CA_FILE) as client:
        uids = client.search(include_seen=include_seen, since=since)
        result.found = len(uids)
        for start in range(0, len(uids), settings.IMAP_FETCH_BATCH):
            if time_budget is not None and time.monotonic() - started > time_budget:
                result.budget_exhausted = True
                break
            mappings = store_mappings()
            seen = [
                message.uid
                for message in client.fetch(uids[start : start + settings.IMAP_FETCH_BATCH])
                if _message_capture(
                    message,
                    MessageSource(mailbox.name, client.uidvalidity, message.uid),
                    breaker,
                    mappings,
                    result,
                    reread=include_seen,
                )
            ]
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


def mailbox_polls_enqueue(*, mailbox_names: list[str]) -> list[Job]:
    """A poll job per mailbox, unless one is still pending or running (a slow poll is never doubled)."""
    enqueued = []
    stamp = timezone.now().strftime("%Y%m%dT%H%M%S")
    for name in mailbox_names:
        prefix = f"{POLL_KIND}:{name}:"
        with transaction.atomic():
            if jobs_for_key_prefix(prefix).filter(status__in=[Job.Status.PENDING, Job.Status.RUNNING]).exists():
                continue
            enqueued.append(
                jobs.enqueue(
                    POLL_KIND, {"mailbox": name}, key=f"{prefix}{stamp}", max_attempts=settings.IMAP_POLL_MAX_ATTEMPTS
                )
            )
    return enqueued
