"""Fixtures for the CRM: a store and email leads as the poller saves them."""

import pytest

from tests.factories import EmailLeadFactory


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

    def make(**fields):
        # Of the fixture's store unless told otherwise (franchise and account id too, whatever the store).
        of_the_store = {"store": store, "franchise": store.franchise, "account_id": store.account_id}
        return EmailLeadFactory(**{**of_the_store, **fields})

    return make
