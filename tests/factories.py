"""Rows the tests build straight in the database, through factory_boy.

`LeadFactory` makes a web-form lead with the model's defaults; `EmailLeadFactory` an email lead as the
mailbox poller saves it (parsed, of a store, received at 14:00 UTC on 10 June 2026) with everything
LeadCreated needs. Keyword arguments override any field, as with `objects.create`.
"""

from datetime import UTC, datetime

import factory
from factory.django import DjangoModelFactory


class StoreFactory(DjangoModelFactory):
    class Meta:
        model = "stores.Store"

    franchise = "OrangeTheory"
    name = factory.Sequence(lambda n: f"Store {n}")
    account_id = factory.Sequence(lambda n: f"acct-f{n}")
    tracking_id = factory.Sequence(lambda n: f"STF{n}")
    lead_email = factory.Sequence(lambda n: f"studio-f{n}@otf-mail.example.com")
    timezone = "UTC"


class LeadFactory(DjangoModelFactory):
    class Meta:
        model = "leadgen.Lead"


class EmailLeadFactory(LeadFactory):
    channel = "email"
    first_name = "Jane"
    last_name = "Doe"
    phone = "+14155550132"
    lead_type = "Web Lead"
    store = factory.SubFactory(StoreFactory)
    franchise = factory.SelfAttribute("store.franchise")
    account_id = factory.SelfAttribute("store.account_id")
    received_at = datetime(2026, 6, 10, 14, 0, tzinfo=UTC)
    parse_state = "parsed"
    processed_by = "imap-poller"
    dedup_key = factory.Sequence(lambda n: f"test#{n}")
