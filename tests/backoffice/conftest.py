"""Two stores, their staff, and leads with tasks at known times: the back office's test world."""

from datetime import time
from itertools import count

import pytest

from tests.factories import EmailLeadFactory

_numbers = count(1)


@pytest.fixture
def make_store(db):
    from stores.models import Store

    def make(name, **fields):
        n = next(_numbers)
        values = {
            "franchise": "OrangeTheory", "name": name, "account_id": f"acct-{n}", "tracking_id": f"ST{n}",
            "lead_email": f"studio{n}@otf-mail.example.com", "timezone": "UTC",
            # No quiet hours: due times are arrival + the SLA, whatever the hour the test runs.
            "quiet_hours_start": time(0, 0), "quiet_hours_end": time(0, 0),
        }  # fmt: skip
        return Store.objects.create(**{**values, **fields})

    return make


@pytest.fixture
def downtown(make_store):
    return make_store("Downtown")


@pytest.fixture
def uptown(make_store):
    return make_store("Uptown")


@pytest.fixture
def make_email_lead():
    """An email lead of `store`, processed as LeadCreated does: contact, outreach task, timeline event.

    `recorded_at` sets when the lead was recorded (created_at) before it is processed.
    """
    from crm.services import lead_created_process
    from leadgen.models import Lead

    def make(store, *, recorded_at=None, phone=None, process=True, **fields):
        n = next(_numbers)
        # Each lead its own person: no two are the same contact.
        values = {"last_name": f"Doe{n}", "phone": phone or f"+1415555{n:04d}", "email": f"jane{n}@example.com"}
        lead = EmailLeadFactory(store=store, **{**values, **fields})
        if recorded_at is not None:
            Lead.objects.filter(pk=lead.pk).update(created_at=recorded_at)
            lead.created_at = recorded_at
        if process:
            lead_created_process(lead_id=lead.pk)
        return lead

    return make


@pytest.fixture
def staff(django_user_model):
    """`staff("ana", SALES, stores=[downtown])` → a staff user in those groups, assigned to those stores."""
    from django.contrib.auth.models import Group

    def make(username, *groups, stores=(), superuser=False):
        user = django_user_model.objects.create_user(
            username, password="a long test password", is_staff=True, is_superuser=superuser
        )
        user.groups.add(*[Group.objects.get(name=name) for name in groups])
        for store in stores:
            store.staff.add(user)
        return user

    return make


@pytest.fixture(autouse=True)
def dashboard_uncached(settings):
    """Figures computed on every load: the cache would carry one test's figures into the next."""
    settings.DASHBOARD_CACHE_SECONDS = 0


@pytest.fixture
def conversation():
    """`conversation(session_id, lead, [(question, answer, answer_state), ...])`: a chat through the chat's own
    services, linked to the lead it produced."""
    from chat import services as chat_services

    def make(session_id, lead, turns):
        for question, answer, state in turns:
            message = chat_services.chat_turn_start(session_id=session_id, client_ip="192.0.2.7", content=question)
            chat_services.chat_answer_save(session_pk=message.session_id, content=answer, metadata={}, state=state)
        chat_services.chat_session_link_lead(session_id=session_id, lead_id=lead.pk)

    return make


@pytest.fixture
def completed_prototype():
    """`completed_prototype(lead, preview_url)`: the lead's prototype, opened by its service, then completed."""
    from django.utils import timezone

    from prototypes import services as prototype_services
    from prototypes.models import Prototype

    def make(lead, url):
        prototype = prototype_services.prototype_open(lead_id=lead.pk)
        Prototype.objects.filter(pk=prototype.pk).update(
            state=Prototype.State.COMPLETED, preview_url=url, title="Gym booking app", finished_at=timezone.now()
        )
        return prototype

    return make
