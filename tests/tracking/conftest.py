"""Fixtures for email lead tracking: a real dovecot IMAP server, a mailbox on it, stores."""

from dataclasses import dataclass

import pytest
from django.core.cache import cache

from standins.lead_emails import STORE_SENDER
from standins.mailbox import Dovecot
from tracking.selectors import STORE_MAPPING_CACHE_KEY
from tracking.services import lead_write_breaker


@pytest.fixture(scope="session")
def dovecot():
    with Dovecot() as server:
        yield server


@dataclass
class ImapAccount:
    server: Dovecot
    username: str
    password: str

    def deliver(self, *messages, received_at=None) -> int:
        return self.server.deliver(self.username, messages, received_at=received_at)


@pytest.fixture
def mailbox(dovecot, settings):
    """An empty INBOX on the dovecot server, configured as the `env` mailbox (IMAP_* settings, TLS)."""
    username, password = dovecot.add_user()
    settings.IMAP_HOST = dovecot.host
    settings.IMAP_PORT = dovecot.imaps_port
    settings.IMAP_SSL = True
    settings.IMAP_USER = username
    settings.IMAP_PASSWORD = password
    settings.IMAP_FOLDER = "INBOX"
    settings.IMAP_CA_FILE = str(dovecot.ca_file)
    return ImapAccount(dovecot, username, password)


@pytest.fixture(autouse=True)
def fresh_tracking_state():
    """The store mapping cache and the lead-write breaker live in Redis, which outlives each test."""
    cache.delete(STORE_MAPPING_CACHE_KEY)
    lead_write_breaker().close()
    yield
    cache.delete(STORE_MAPPING_CACHE_KEY)
    lead_write_breaker().close()


@pytest.fixture
def make_store(db):
    from stores.models import Store

    def make(**fields):
        defaults = {
            "franchise": "OrangeTheory",
            "name": "Downtown",
            "account_id": "acct-0421",
            "tracking_id": "ST0421",
            "lead_email": STORE_SENDER,
            "timezone": "America/Los_Angeles",
        }
        return Store.objects.create(**{**defaults, **fields})

    return make
