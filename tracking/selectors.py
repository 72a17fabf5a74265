"""Reads for email lead tracking: the store mapping, the mailboxes to poll, and the back office's figures."""

import os
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.core.cache import cache
from django.db.models import Max
from django.db.models.fields.json import KT

import jobs
from integrations.imap.client import MailboxSettings
from stores.models import Store
from tracking.keys import LEAD_WRITE_BREAKER, POLL_KIND, STORE_MAPPING_CACHE_KEY, STORE_MAPPING_CACHE_SECONDS
from tracking.models import ENV_MAILBOX_NAME, ENV_VAR_NAME, Mailbox, imap_host_allowed


@dataclass(frozen=True)
class StoreMapping:
    store_id: int
    franchise: str
    account_id: str
    sender_domain: str = ""  # of the store's lead email: what a notification's sender must authenticate as


class StoreMappings:
    """Active stores by lower-cased tracking id and lead email: a snapshot, read once per batch of emails."""

    def __init__(self, table: dict):
        self._table = table

    def lookup(self, *, tracking_id: str, lead_emails: tuple[str, ...]) -> StoreMapping | None:
        """The store a lead email belongs to: by the tracking id of its recipient, else by the first of
        `lead_emails` (its sender, then the original recipient of a forward) that is a store's lead email."""
        found = tracking_id and self._table["tracking_id"].get(tracking_id.lower())
        for address in lead_emails:
            found = found or (address and self._table["lead_email"].get(address.lower()))
        return StoreMapping(*found) if found else None


def store_mappings() -> StoreMappings:
    """From the cache, refilled from the database when a Store changed (see tracking.signals)."""
    table = cache.get(STORE_MAPPING_CACHE_KEY)
    if table is None:
        table = {"tracking_id": {}, "lead_email": {}}
        stores = Store.objects.filter(is_active=True).values_list(
            "pk", "franchise", "account_id", "tracking_id", "lead_email"
        )
        for pk, franchise, account_id, tracking_id, lead_email in stores:
            mapping = (pk, franchise, account_id, lead_email.rpartition("@")[2].lower() if lead_email else "")
            if tracking_id:
                table["tracking_id"][tracking_id.lower()] = mapping
            if lead_email:
                table["lead_email"][lead_email.lower()] = mapping
        cache.set(STORE_MAPPING_CACHE_KEY, table, STORE_MAPPING_CACHE_SECONDS)
    return StoreMappings(table)


def mailbox_names_active() -> list[str]:
    """The mailboxes to poll: the one from IMAP_* settings (when IMAP_HOST is set) and active admin rows."""
    names = [ENV_MAILBOX_NAME] if settings.IMAP_HOST else []
    return names + list(Mailbox.objects.filter(is_active=True).values_list("name", flat=True))


def mailbox_settings(name: str) -> MailboxSettings:
    """Connection settings of one mailbox. LookupError when it is unknown, inactive or has no password."""
    if name == ENV_MAILBOX_NAME:
        if not settings.IMAP_HOST:
            raise LookupError("the env mailbox is not configured: IMAP_HOST is empty")
        return MailboxSettings(
            name=ENV_MAILBOX_NAME,
            host=settings.IMAP_HOST,
            port=settings.IMAP_PORT,
            username=settings.IMAP_USER,
            password=settings.IMAP_PASSWORD,
            folder=settings.IMAP_FOLDER,
            use_ssl=settings.IMAP_SSL,
        )
    row = Mailbox.objects.filter(name=name, is_active=True).first()
    if row is None:
        raise LookupError(f"no active mailbox named {name!r}")
    # Checked here as well as on save: a row written before these rules, or by hand, gets no password.
    if not ENV_VAR_NAME.fullmatch(row.password_env_var):
        raise LookupError(f"mailbox {name!r}: the password variable must be an IMAP_PASSWORD_* one")
    if not imap_host_allowed(row.host, row.port):
        raise LookupError(f"mailbox {name!r}: its host is not in IMAP_ALLOWED_HOSTS")
    password = os.environ.get(row.password_env_var)
    if not password:
        raise LookupError(f"mailbox {name!r}: environment variable {row.password_env_var} is not set")
    return MailboxSettings(
        name=row.name,
        host=row.host,
        port=row.port,
        username=row.username,
        password=password,
        folder=row.folder,
        use_ssl=row.use_ssl,
    )


def imap_allowed_endpoints() -> frozenset[str]:
    """`host` and `host:port` entries an IMAP login may go to: IMAP_ALLOWED_HOSTS and the env mailbox's own."""
    entries = {entry.strip().lower() for entry in settings.IMAP_ALLOWED_HOSTS if entry.strip()}
    if settings.IMAP_HOST:
        entries.add(f"{settings.IMAP_HOST.strip().lower()}:{settings.IMAP_PORT}")
    return frozenset(entries)


# --- back-office figures ------------------------------------------------------------------------


def mailbox_last_polls() -> list[dict]:
    """Each mailbox polled now, with its newest poll job: {mailbox, status, at} (None, None when never)."""
    polls = []
    for name in mailbox_names_active():
        job = jobs.jobs_with_key_prefix(f"{POLL_KIND}:{name}:").order_by("-created_at").only("status", "created_at")
        job = job.first()
        polls.append({"mailbox": name, "status": job.status if job else None, "at": job.created_at if job else None})
    return polls


def mailbox_last_successful_polls() -> dict[str, datetime | None]:
    """Each mailbox polled now: when its newest successful poll finished (None: none within job retention).
    One query over the poll jobs, through their keys' index, for every mailbox."""
    succeeded = (
        jobs.jobs_with_key_prefix(f"{POLL_KIND}:")
        .filter(status="succeeded")
        .values(mailbox=KT("payload__mailbox"))
        .annotate(at=Max("finished_at"))
        .order_by()
    )
    finished = {row["mailbox"]: row["at"] for row in succeeded}
    return {name: finished.get(name) for name in mailbox_names_active()}


def circuit_breakers() -> dict[str, dict]:
    """The breakers of email lead tracking and their shared state: {name: {state, opened_at}}."""
    name = LEAD_WRITE_BREAKER
    return {name: {"state": jobs.circuit_state(name), "opened_at": jobs.circuit_opened_at(name)}}

