"""Fixtures of data-subject requests: a person with rows in every app, seeded the way each app writes them
where that is one call (the web form, a chat, a platform's webhook, a parked email lead), with the ORM where
the app's writer needs more (contacts and their timeline, prototypes, tracked users, the admin history)."""

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import count

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.core.cache import cache
from django.urls import reverse

from chat import services as chat_services
from chat.models import ChatSession
from crm.models import Contact, Task, TimelineEvent
from docs_users.models import TrackedUser
from docs_users.sync import DELIVER_KIND
from jobs.models import Job, JobAttempt, JobStep
from leadgen.consent import CONSENT_TEXT, CONSENT_VERSION
from leadgen.models import Lead
from prototypes.models import Prototype, PrototypeEvent
from sources.models import InboundLead, InboundRequest, InboundSource
from standins import platforms as standin
from stores.models import Store
from tests.factories import EmailLeadFactory, LeadFactory
from tracking import services as tracking_services
from tracking.models import EmailLead
from tracking.parsing import ParsedLeadEmail

_numbers = count(1)
GENERIC_SECRET = standin.standard_webhooks_secret()


@pytest.fixture(autouse=True)
def offline(settings):
    """Every integration off: the intake answers from the rules and nothing calls out; rate-limit buckets
    and throttles (in the shared cache) start empty."""
    settings.RECAPTCHA_SITE_KEY = ""
    settings.RECAPTCHA_SECRET_KEY = ""
    settings.LLM_BASE_URL = ""
    settings.PIPEDRIVE_API_TOKEN = ""
    settings.CLICKUP_API_TOKEN = ""
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    cache.clear()
    yield
    cache.clear()


@dataclass
class Person:
    first_name: str
    last_name: str
    email: str
    phone: str  # E.164
    rows: dict[str, set] = field(default_factory=dict)  # table → ids seeded for this person

    @property
    def full_name(self) -> str:
        return f"{self.first_name} {self.last_name}"

    @property
    def identifiers(self) -> list[str]:
        """What must be nowhere once they are erased: the email, the phone (and its national digits), the
        names."""
        return [self.email, self.phone, self.phone.removeprefix("+1"), self.first_name, self.last_name]

    def add(self, instance):
        pk = instance.pk if isinstance(instance.pk, int) else str(instance.pk)  # as JSON writes a UUID
        self.rows.setdefault(instance._meta.db_table, set()).add(pk)
        return instance


@pytest.fixture
def store(db):
    return Store.objects.create(
        franchise="Northwind", name="Harbour", account_id="acct-7", tracking_id="HB7", lead_email="harbour@nw.example"
    )


@pytest.fixture
def seed(client, store, admin_user):
    """`seed(person)`: the person's rows in every app; `person.rows` names each one seeded."""
    source = InboundSource.objects.create(name="Generic", kind="generic", secret=GENERIC_SECRET, store=store)

    def make(person: Person) -> Person:
        # The web form, through the API, with the consent it shows.
        body = {
            "firstName": person.first_name, "lastName": person.last_name, "email": person.email.upper(),
            "phone": person.phone, "company": f"{person.last_name} Works", "serviceType": "dedicated_team",
            "message": f"Call {person.first_name} on {person.phone}.",
            "consent": {"version": CONSENT_VERSION, "text": CONSENT_TEXT},
        }  # fmt: skip
        response = client.post(reverse("leads-create"), json.dumps(body), content_type="application/json")
        assert response.status_code == 200, response.content
        web = person.add(Lead.objects.get(public_id=response.json()["leadId"]))
        for job in Job.objects.filter(payload__lead_id=web.pk):
            person.add(job)

        # A sales chat that made the web lead, and one in which they only gave their email.
        chat_services.chat_turn_start(
            session_id=f"chat-{web.pk}", client_ip="198.51.100.9", content=f"I am {person.full_name}."
        )
        chat_services.chat_session_link_lead(session_id=f"chat-{web.pk}", lead_id=web.pk)
        chat_services.chat_turn_start(
            session_id=f"chat-{web.pk}-b", client_ip=None, content=f"Write to {person.email.title()} please"
        )
        for session in web.chat_sessions.all():
            person.add(session)
        session = ChatSession.objects.get(session_id=f"chat-{web.pk}-b")
        chat_services.chat_answer_save(
            session_pk=session.pk, content=f"Thank you, {person.first_name}!", metadata={}, state="complete"
        )
        person.add(session)
        for message in session.messages.all() | web.chat_sessions.get().messages.all():
            person.add(message)

        # A prototype of a diagnostic lead, its event log, a job and the ClickUp task its alert made.
        diagnostic = person.add(
            LeadFactory(first_name=person.first_name, last_name=person.last_name, email=person.email,
                        service_type="diagnostic", store=store)
        )  # fmt: skip
        prototype = person.add(
            Prototype.objects.create(lead=diagnostic, state="completed", chat_id=f"v0-{diagnostic.pk}")
        )
        person.add(PrototypeEvent.objects.create(prototype=prototype, number=1, kind="complete",
                                                 data={"title": f"{person.last_name} dashboard"}))  # fmt: skip
        alert = person.add(
            Job.objects.create(kind="prototypes.ready_alert", key=f"prototypes.ready_alert:{prototype.pk}",
                               payload={"prototype_id": prototype.pk}, status="succeeded")
        )  # fmt: skip
        person.add(JobStep.objects.create(job_key=alert.key, step="alert", result={"task_id": f"cu-{prototype.pk}"}))

        # An email lead with its contact, outreach task and timeline, and one the parser could not read.
        email_lead = person.add(
            EmailLeadFactory(
                first_name=person.first_name, last_name=person.last_name, email=person.email, phone=person.phone,
                store=store, raw_body=f"Name: {person.full_name}\nEmail: {person.email}\nPhone: {person.phone}",
            )
        )  # fmt: skip
        person.add(
            LeadFactory(
                channel="email", store=store, parse_state="failed", parse_error="no lead fields",
                dedup_key=f"seed#{next(_numbers)}", raw_body=f"Someone wrote: reach me at {person.email}",
            )
        )  # fmt: skip
        contact = person.add(
            Contact.objects.create(store=store, email=person.email, phone=person.phone, first_name=person.first_name,
                                   last_name=person.last_name, company=f"{person.last_name} Works")
        )  # fmt: skip
        task = person.add(
            Task.objects.create(contact=contact, store=store, task_type="lead_outreach", type_category="lead_outreach",
                                source_type="lead", source_lead=email_lead, due_at=email_lead.received_at,
                                action_needed_reason=f"New Web Lead from {person.full_name}")
        )  # fmt: skip
        for number, lead in enumerate((web, email_lead)):
            person.add(
                TimelineEvent.objects.create(
                    contact=contact, store=store, event_type="lead.created", event_category="lead",
                    entity_type="lead", entity_id=str(lead.pk), occurred_at=lead.created_at,
                    new_value={"firstName": person.first_name, "lastName": person.last_name},
                    idempotency_key=f"lead.created:{lead.pk}:{number}",
                )
            )  # fmt: skip
        escalation = person.add(
            Job.objects.create(kind="crm.task_escalate", key=f"crm.task_escalate:{task.pk}",
                               payload={"task_id": str(task.pk), "owner_id": admin_user.pk}, status="succeeded")
        )  # fmt: skip
        person.add(JobAttempt.objects.create(job=escalation, number=1, started_at=task.due_at, outcome="succeeded"))
        # Staff's admin history of the contact, and of the lead on the Email leads page (a proxy of Lead).
        for changed in (contact, EmailLead.objects.get(pk=email_lead.pk)):
            (entry,) = LogEntry.objects.log_actions(
                admin_user.pk, [changed], CHANGE, change_message=f"Renamed {person.first_name}"
            )
            person.add(entry)

        # A lead email the database would not take, parked as a retry job that died.
        parked = tracking_services.email_lead_park(
            parsed=ParsedLeadEmail(first_name=person.first_name, last_name=person.last_name, email=person.email,
                                   phone=person.phone, raw_body=f"New lead: {person.full_name}",
                                   received_at=datetime(2026, 6, 11, 9, tzinfo=UTC)),
            source=tracking_services.MessageSource("env", 1, next(_numbers)),
        )  # fmt: skip
        Job.objects.filter(pk=parked.pk).update(status="dead", last_error="permanent: the database refused it")
        person.add(parked)

        # A platform's signed webhook: the request log and the lead it made.
        sent = standin.generic_webhook(
            secret=GENERIC_SECRET,
            payload={"first_name": person.first_name, "last_name": person.last_name, "email": person.email,
                     "phone": person.phone, "message": f"From {person.full_name}"},
        )  # fmt: skip
        headers = {name: value for name, value in sent.headers.items() if name != "Content-Type"}
        url = reverse("sources-webhook", args=[source.public_id])
        assert client.post(url, data=sent.body, content_type="application/json", headers=headers).status_code == 200
        request = person.add(InboundRequest.objects.latest("pk"))
        made = person.add(InboundLead.objects.get(request=request))
        person.add(made.lead)
        for job in Job.objects.filter(payload__lead_id=made.lead_id):
            person.add(job)

        # A signed-in docs reader, and the delivery of their profile to the CRM.
        user = person.add(
            TrackedUser.objects.create(sub=f"auth0|{next(_numbers)}", email=person.email.upper(),
                                       given_name=person.first_name, family_name=person.last_name,
                                       last_activity_at=datetime(2026, 6, 12, tzinfo=UTC),
                                       docs_search_terms=[f"{person.last_name} pricing"])
        )  # fmt: skip
        person.add(
            Job.objects.create(kind=DELIVER_KIND, key=f"{DELIVER_KIND}:{user.pk}:1", payload={"user_id": user.pk})
        )
        return person

    return make


@pytest.fixture
def zephyrine(seed):
    return seed(Person("Zephyrine", "Quillfeather", "zephyrine.q@orchard.example", "+14155550199"))


@pytest.fixture
def barnaby(seed):
    return seed(Person("Barnaby", "Thistlewood", "barnaby@thistle.example", "+14155550142"))
