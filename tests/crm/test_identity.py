"""Identity on arrival: every channel's lead joins one contact per person (by email and phone, within its store or
the shared pool), concurrent arrivals make one contact, and stores never share one."""

import json
import threading
from datetime import UTC, datetime, time, timedelta

import pytest
from django.core.cache import cache
from django.db import connection
from django.urls import reverse

from chat import services as chat_services
from crm.intake import LEAD_CREATED
from crm.models import Contact, RepProfile, Task, TimelineEvent
from crm.services import lead_created_process
from docs_users import activity
from jobs.models import Job
from leadgen.models import Lead
from leadgen.services import LEAD_ARRIVED
from sources.models import InboundSource
from standins import platforms as standin
from standins.lead_emails import lead_message
from tests.factories import LeadFactory
from tests.sources.support import SECRETS, post, signed
from tests.tracking.support import run_jobs
from tracking.parsing import parse_lead_email
from tracking.services import email_lead_capture

pytestmark = pytest.mark.django_db

CHAT_KEY = "chat-key-for-identity-tests"
NOON = datetime(2026, 6, 10, 16, 0, tzinfo=UTC)  # 12:00 in New York: outside every quiet hour here
PERSON = standin.PERSON  # Ada Lovelace, ada@example.com, +442079460958


@pytest.fixture(autouse=True)
def no_outside_services(settings):
    """The rules classify, no reCAPTCHA, the chat agent's key; throttles fresh; no prototype is opened."""
    settings.LLM_BASE_URL = ""
    settings.RECAPTCHA_SECRET_KEY = ""
    settings.CHAT_API_KEY = CHAT_KEY
    settings.LEADS_PROTOTYPE_SERVICE_TYPES = []
    cache.clear()
    yield
    cache.clear()


def form_body(**overrides) -> dict:
    body = {
        "firstName": PERSON["first_name"], "lastName": PERSON["last_name"], "email": PERSON["email"],
        "phone": PERSON["phone"], "company": PERSON["company"], "message": "We want to automate our invoicing.",
        "serviceType": "process_automation", "steps": {"teamSize": "10-50", "tools": ["Sheets", "Xero"]},
    }  # fmt: skip
    return {**body, **overrides}


def post_form(client, body, **headers):
    response = client.post("/api/leads", json.dumps(body), content_type="application/json", **headers)
    assert response.status_code == 200, response.content
    return Lead.objects.get(public_id=response.json()["leadId"])


def identity_jobs_run() -> int:
    return run_jobs(LEAD_ARRIVED) + run_jobs(LEAD_CREATED)


def test_the_same_person_through_form_chat_email_and_a_webhook_is_one_contact_with_all_four(client, django_user_model):
    # Each arrival is processed before the next comes, as the workers do.
    # 1. The web form, as a browser sends it.
    form_lead = post_form(client, form_body(email="  Ada@Example.com"))
    assert identity_jobs_run() == 1
    # 2. The sales chat: a conversation, then the agent creates the lead for it (email only, written otherwise).
    chat_services.chat_turn_start(session_id="chat-ada-1", client_ip="192.0.2.7", content="Can you automate Xero?")
    chat_lead = post_form(
        client, form_body(email="ADA@example.com", phone="", sessionId="chat-ada-1"), HTTP_X_CHAT_API_KEY=CHAT_KEY
    )
    assert identity_jobs_run() == 1
    # 3. A lead-notification email no store mapping knows (so, like the others, of no store): phone only.
    raw = lead_message(first="Ada", last="Lovelace", phone="+44 20 7946 0958", tracking_id="NOPE")
    email_lead = email_lead_capture(parsed=parse_lead_email(raw, received_at=NOON))
    assert identity_jobs_run() == 1
    # 4. A platform's signed webhook (a generic source of no store), the person as the platform sends it.
    source = InboundSource.objects.create(name="Landing pages", kind="generic", secret=SECRETS["generic"])
    response = post(client, source, signed("generic"))
    assert response.status_code == 200, response.content
    [public_id] = response.json()["leads"]
    webhook_lead = Lead.objects.get(public_id=public_id)
    assert identity_jobs_run() == 1

    contact = Contact.objects.get()
    assert (contact.store, contact.email, contact.phone) == (None, "ada@example.com", "+442079460958")
    assert (contact.first_name, contact.last_name, contact.company) == ("Ada", "Lovelace", PERSON["company"])
    arrivals = TimelineEvent.objects.filter(contact=contact, event_type="lead.created")
    assert dict(arrivals.values_list("entity_id", "new_value__channel")) == {
        str(form_lead.pk): "web_form", str(chat_lead.pk): "web_form", str(email_lead.pk): "email",
        str(webhook_lead.pk): "webhook",
    }  # fmt: skip
    chat = TimelineEvent.objects.get(contact=contact, event_type="chat.linked")
    assert chat.new_value == {"sessionId": "chat-ada-1", "leadId": chat_lead.pk}
    task = Task.objects.get()
    assert (task.contact, task.source_lead, task.store, task.status) == (contact, form_lead, None, "pending")

    # What a manager sees on the contact's page: the four arrivals and the conversation.
    client.force_login(django_user_model.objects.create_superuser("boss", "boss@example.com", "pw"))
    page = client.get(reverse("admin:crm_contact_change", args=[contact.pk])).content.decode()
    timeline = page[page.index('id="contact-timeline"') :]
    for lead in (form_lead, chat_lead, email_lead, webhook_lead):
        assert reverse("admin:leadgen_lead_change", args=[lead.pk]) in timeline
    assert "Web form lead" in timeline and "Email lead" in timeline and "Webhook lead" in timeline
    assert "Chat chat-ada-1" in timeline and "Can you automate Xero?" in timeline


def test_every_qualified_web_lead_opens_a_task_with_the_shared_pools_quiet_hours(client, settings):
    settings.SHARED_POOL_TIMEZONE = "Europe/Berlin"
    lead = post_form(client, form_body())
    assert sorted(Job.objects.filter(key__endswith=f":{lead.pk}").values_list("kind", flat=True)) == [
        "leadgen.confirmation_email", "leadgen.lead_alert", LEAD_ARRIVED, "leadgen.pipedrive_sync",
    ]  # fmt: skip
    night = datetime(2026, 6, 10, 20, 30, tzinfo=UTC)  # 22:30 in Berlin: within the pool's quiet hours
    Lead.objects.filter(pk=lead.pk).update(created_at=night)

    identity_jobs_run()

    task = Task.objects.get()
    assert (task.store, task.source_lead, task.priority) == (None, lead, "high")
    assert task.action_needed_reason == "New Process automation from Ada Lovelace"
    assert task.due_at == datetime(2026, 6, 11, 6, 0, tzinfo=UTC), "08:00 in Berlin, when the pool opens"


def test_spam_vendors_and_test_leads_make_no_contact(client):
    spam = post_form(client, form_body(email="bot@mailinator.com"))
    vendor = post_form(client, form_body(email="sales@agency.example", message="We offer link building services."))
    assert (spam.status, vendor.status) == ("spam", "vendor")
    test_lead = LeadFactory(email="probe@example.com", channel="webhook", is_test=True)

    for lead in (spam, vendor, test_lead):
        assert lead_created_process(lead_id=lead.pk).contact_id is None
    assert not Job.objects.filter(kind=LEAD_ARRIVED).exists()
    assert (Contact.objects.count(), Task.objects.count(), TimelineEvent.objects.count()) == (0, 0, 0)


def test_the_identity_step_can_be_switched_off(client, settings):
    settings.LEAD_IDENTITY_ENABLED = False
    lead = post_form(client, form_body())
    assert LEAD_ARRIVED not in Job.objects.filter(key__endswith=f":{lead.pk}").values_list("kind", flat=True)


def test_one_match_gains_what_it_lacks_and_keeps_what_it_has(make_lead, store):
    lead_created_process(lead_id=make_lead(phone="+14155550132", first_name="", last_name="Doe").pk)
    later = make_lead(phone="(415) 555-0132", email=" Jane@Example.COM ", first_name="Jane", last_name="Dough",
                      company="Acme", received_at=NOON + timedelta(hours=1))  # fmt: skip
    lead_created_process(lead_id=later.pk)

    contact = Contact.objects.get()
    assert (contact.phone, contact.email, contact.first_name, contact.last_name, contact.company) == (
        "+14155550132", "jane@example.com", "Jane", "Doe", "Acme",
    )  # fmt: skip
    assert contact.last_activity_at == NOON + timedelta(hours=1)

    by_email_only = make_lead(phone="", email="jane@example.com", received_at=NOON + timedelta(hours=2))
    assert lead_created_process(lead_id=by_email_only.pk).contact_id == contact.pk


def test_email_and_phone_of_two_contacts_join_the_emails_and_leave_the_other_as_it_is(make_lead):
    by_phone = lead_created_process(lead_id=make_lead(phone="+14155550132", first_name="Phone").pk).contact_id
    by_email = lead_created_process(
        lead_id=make_lead(phone="", email="jane@example.com", first_name="Email").pk
    ).contact_id
    both = make_lead(phone="+14155550132", email="jane@example.com", first_name="Both")

    assert lead_created_process(lead_id=both.pk).contact_id == by_email
    assert Contact.objects.get(pk=by_email).phone == "", "the phone is the other contact's: it stays there"
    assert Contact.objects.get(pk=by_phone).email == ""
    assert Contact.objects.count() == 2


def test_the_same_email_at_two_stores_and_in_the_shared_pool_is_three_contacts(make_lead, store):
    uptown = store.__class__.objects.create(franchise="OrangeTheory", name="Uptown", account_id="acct-9")
    leads = [
        make_lead(phone="", email="jane@example.com"),
        make_lead(phone="", email="jane@example.com", store=uptown, account_id="acct-9"),
        make_lead(phone="", email="jane@example.com", store=None, franchise="", account_id=""),
    ]
    contacts = {lead_created_process(lead_id=lead.pk).contact_id for lead in leads}

    assert len(contacts) == 3
    assert sorted(Contact.objects.values_list("store__name", flat=True), key=str) == ["Downtown", None, "Uptown"]
    assert sorted(Task.objects.values_list("store__name", flat=True), key=str) == ["Downtown", None, "Uptown"]


def test_a_processed_lead_stays_with_its_contact_when_processed_again(make_lead):
    lead = make_lead(phone="+14155550132")
    first = lead_created_process(lead_id=lead.pk).contact_id
    # Staff joined the lead's events to another contact of the same person (as a merge does).
    other = Contact.objects.create(store=lead.store, email="jane@example.com")
    TimelineEvent.objects.filter(contact_id=first).update(contact=other)
    Task.objects.filter(contact_id=first).update(contact=other)
    Contact.objects.filter(pk=first).delete()

    assert lead_created_process(lead_id=lead.pk).contact_id == other.pk
    assert list(Contact.objects.values_list("pk", flat=True)) == [other.pk], "the merged-away contact stays gone"


def test_a_docs_reader_with_a_verified_email_joins_the_shared_pools_contact(client):
    lead = post_form(client, form_body())
    identity_jobs_run()
    contact = Contact.objects.get()

    at = NOON + timedelta(days=1)
    reader = activity.tracked_user_sign_in(
        sub="auth0|ada", channel="docs-login", email=PERSON["email"], given_name="Ada", at=at
    )
    activity.tracked_user_sign_in(sub="auth0|ada", channel="mcp", email=PERSON["email"], at=at + timedelta(hours=1))

    signed_in = TimelineEvent.objects.get(event_type="docs.signed_in")
    assert (signed_in.contact, signed_in.store, signed_in.entity_id, signed_in.occurred_at) == (
        contact, None, str(reader.pk), at,
    )  # fmt: skip
    assert Contact.objects.count() == 1 and Task.objects.get().source_lead == lead, "a sign-in is not a lead"

    activity.tracked_user_sign_in(sub="auth0|grace", channel="docs-login", email="Grace@Example.com", at=at)
    grace = Contact.objects.get(email="grace@example.com")
    assert (grace.store, grace.timeline.get().event_type) == (None, "docs.signed_in")


# --- concurrent arrivals ---------------------------------------------------------------------------


def run_together(lead_ids: list[int]) -> list[Exception]:
    """Each lead processed by its own thread (its own connection), all released at once."""
    barrier, errors = threading.Barrier(len(lead_ids)), []

    def process(lead_id):
        try:
            barrier.wait()
            lead_created_process(lead_id=lead_id)
        except Exception as exc:  # collected for the caller's assertion
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=process, args=(lead_id,)) for lead_id in lead_ids]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("where", ["store", "shared pool"])
def test_concurrent_arrivals_of_one_person_make_one_contact(make_lead, store, where):
    of_store = {} if where == "store" else {"store": None, "franchise": "", "account_id": ""}
    # The same person, known by the email alone or by the email and the phone, each written its own way.
    emails = ["jane@example.com", "Jane@Example.com", " JANE@example.com", "jane@EXAMPLE.com"]
    phones = ["", "+14155550132", "", "(415) 555-0132"]
    leads = [
        make_lead(email=email, phone=phone, received_at=NOON + timedelta(minutes=n), **of_store)
        for n, (email, phone) in enumerate(zip(emails * 2, phones * 2, strict=True))
    ]

    assert run_together([lead.pk for lead in leads]) == []

    contact = Contact.objects.get()
    assert (contact.email, contact.phone) == ("jane@example.com", "+14155550132")
    assert contact.store_id == (store.pk if where == "store" else None)
    assert Task.objects.filter(status="pending").count() == 1
    assert TimelineEvent.objects.filter(contact=contact, event_type="lead.created").count() == len(leads)


@pytest.mark.django_db(transaction=True)
def test_concurrent_arrivals_at_two_stores_stay_two_contacts(make_lead, store):
    uptown = store.__class__.objects.create(franchise="OrangeTheory", name="Uptown", account_id="acct-9")
    leads = [make_lead(email="jane@example.com", phone="+14155550132") for _ in range(3)]
    leads += [make_lead(email="jane@example.com", phone="+14155550132", store=uptown) for _ in range(3)]

    assert run_together([lead.pk for lead in leads]) == []

    assert sorted(Contact.objects.values_list("store__name", flat=True)) == ["Downtown", "Uptown"]
    for contact in Contact.objects.all():
        stores = set(contact.timeline.values_list("store_id", flat=True))
        assert stores == {contact.store_id}, "each store's leads on its own contact only"


def test_a_contact_known_only_by_email_is_found_by_it_in_the_contacts_tasks_and_timeline(
    client, make_lead, django_user_model
):
    contact_id = lead_created_process(lead_id=make_lead(phone="", email="jane@example.com").pk).contact_id
    client.force_login(django_user_model.objects.create_superuser("boss", "boss@example.com", "pw"))

    for model in ("contact", "task", "timelineevent"):
        listing = client.get(reverse(f"admin:crm_{model}_changelist"), {"q": "Jane@Example.com"})
        found = listing.context["cl"].result_list
        assert [getattr(row, "contact_id", row.pk) for row in found] == [contact_id], model


def test_the_outreach_task_gets_its_owner_on_arrival_and_a_covered_lead_takes_nobodys_turn(
    make_lead, store, django_user_model
):
    reps = []
    for name in ("ana", "ben"):
        user = django_user_model.objects.create_user(name, is_staff=True)
        store.staff.add(user)
        RepProfile.objects.create(user=user, work_days=[1, 2, 3, 4, 5, 6, 7], work_start=time(0), work_end=time(0))
        reps.append(user)

    first = lead_created_process(lead_id=make_lead(phone="+14155550101").pk)
    covered = lead_created_process(lead_id=make_lead(phone="+14155550101", received_at=NOON).pk)
    second = lead_created_process(lead_id=make_lead(phone="+14155550102").pk)

    assert first.task_created and not covered.task_created and second.task_created
    owners = list(Task.objects.order_by("created_at").values_list("assigned_to", flat=True))
    assert sorted(owners) == sorted(rep.pk for rep in reps), "one each: the covered lead took no turn"
