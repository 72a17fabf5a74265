"""Reads for email lead tracking: the store mapping and the mailboxes to poll."""

import os
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache

from integrations.imap import MailboxSettings
from tracking.models import ENV_MAILBOX_NAME, Mailbox, Store

STORE_MAPPING_CACHE_KEY = "tracking:store-mapping"


@dataclass(frozen=True)
class StoreMapping:
    store_id: int
    franchise: str
    account_id: str


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
            mapping = (pk, franchise, account_id)
            if tracking_id:
                table["tracking_id"][tracking_id.lower()] = mapping
            if lead_email:
                table["lead_email"][lead_email.lower()] = mapping
        cache.set(STORE_MAPPING_CACHE_KEY, table, settings.STORE_MAPPING_CACHE_SECONDS)
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
