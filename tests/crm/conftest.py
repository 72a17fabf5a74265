"""Fixtures for the CRM: a store and email leads as the poller saves them."""

from datetime import UTC, datetime
from itertools import count

import pytest

_numbers = count(1)


@pytest.fixture
def store(db):
    from stores.models import Store

    return Store.objects.create(
        franchise="OrangeTheory", name="Downtown", account_id="acct-0421", tracking_id="ST0421",
        lead_email="studio0421@otf-mail.example.com", timezone="America/New_York",
    )  # fmt: skip


@pytest.fixture
def make_lead(store):
    """An email lead with everything LeadCreated needs; received at 14:00 UTC (10:00 in New York) by default."""
    from leadgen.models import Lead

    def make(*, phone="+14155550132", received_at=datetime(2026, 6, 10, 14, 0, tzinfo=UTC), **fields):
        values = {
            "channel": Lead.Channel.EMAIL, "first_name": "Jane", "last_name": "Doe", "phone": phone,
            "lead_type": "Web Lead", "store": store, "franchise": store.franchise, "account_id": store.account_id,
            "received_at": received_at, "parse_state": Lead.ParseState.PARSED, "processed_by": "imap-poller",
            "dedup_key": f"test#{next(_numbers)}",
        }  # fmt: skip
        return Lead.objects.create(**{**values, **fields})

    return make
