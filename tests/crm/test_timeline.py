"""A contact's page shows every touchpoint in time order with its details: the form's answers, the chat that
produced a lead, the prototype and its state, docs sign-ins, tasks and their outcomes; each detail only to staff
who may read it, in a fixed number of queries however long the timeline."""

import json
import re
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import Group, Permission
from django.core.cache import cache
from django.urls import reverse
from django.utils import timezone

from chat import services as chat_services
from chat.models import ChatSession
from crm.models import Contact, Task, TimelineEvent
from crm.selectors import TIMELINE_LIMIT
from crm.services import task_mark_contacted
from docs_users import activity
from foundation.staff_groups import MANAGERS, SALES
from leadgen.models import Lead
from leadgen.services import LEAD_ARRIVED
from prototypes import services as prototype_services
from prototypes.models import Prototype
from tests.tracking.support import run_jobs

pytestmark = pytest.mark.django_db

CHAT_KEY = "chat-key-for-timeline-tests"
T0 = datetime(2026, 6, 1, 14, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def no_outside_services(settings):
    settings.LLM_BASE_URL = ""
    settings.RECAPTCHA_SECRET_KEY = ""
    settings.CHAT_API_KEY = CHAT_KEY
    settings.LEADS_PROTOTYPE_SERVICE_TYPES = []
    cache.clear()
    yield
    cache.clear()


def arrive(client, *, at, session_id="", **fields) -> Lead:
    """A lead through POST /api/leads (through the chat agent with `session_id`), recorded at `at`, processed."""
    body = {
        "firstName": "Grace", "lastName": "Hopper", "email": "grace@navy.example", "company": "Navy",
        "serviceType": "process_automation", **fields,
    }  # fmt: skip
    headers = {}
    if session_id:
        body["sessionId"], headers["HTTP_X_CHAT_API_KEY"] = session_id, CHAT_KEY
    response = client.post("/api/leads", json.dumps(body), content_type="application/json", **headers)
    assert response.status_code == 200, response.content
    lead = Lead.objects.get(public_id=response.json()["leadId"])
    Lead.objects.filter(pk=lead.pk).update(created_at=at)
    assert run_jobs(LEAD_ARRIVED) == 1
    return lead


@pytest.fixture
def grace(client):
    """One person's touchpoints an hour apart: a form with answers, a chat that made a lead, a prototype of the
    form's lead, a docs sign-in, and the outreach task marked contacted (now)."""
    form = arrive(client, at=T0, steps={"teamSize": "10-50", "tools": ["Sheets", "Xero"]}, message="Invoices!")
    prototype = prototype_services.prototype_open(lead_id=form.pk)
    Prototype.objects.filter(pk=prototype.pk).update(
        created_at=T0 + timedelta(minutes=1), state=Prototype.State.COMPLETED, title="Invoice bot",
        preview_url="https://v0.example.dev/preview/grace", finished_at=T0 + timedelta(minutes=20),
    )  # fmt: skip
    chat_services.chat_turn_start(session_id="chat-grace", client_ip="192.0.2.7", content="Do you do Xero?")
    ChatSession.objects.filter(session_id="chat-grace").update(first_seen_at=T0 + timedelta(hours=1))
    chat_lead = arrive(client, at=T0 + timedelta(hours=1, minutes=5), session_id="chat-grace")
    reader = activity.tracked_user_sign_in(
        sub="auth0|grace", channel="docs-login", email="grace@navy.example", at=T0 + timedelta(hours=2)
    )
    task = Task.objects.get()
    task_mark_contacted(task_id=task.pk, actor="ana", reason="Booked a call for Monday")
    return {"contact": Contact.objects.get(), "form": form, "chat_lead": chat_lead, "prototype": prototype,
            "reader": reader, "task": task}  # fmt: skip


def staff_client(client, django_user_model, *groups, permissions=()):
    user = django_user_model.objects.create_user(f"user{len(groups)}{len(permissions)}", is_staff=True)
    user.groups.add(*Group.objects.filter(name__in=groups))
    user.user_permissions.add(*Permission.objects.filter(codename__in=permissions))
    client.force_login(user)
    return client


def timeline_of(client, contact) -> str:
    page = client.get(reverse("admin:crm_contact_change", args=[contact.pk])).content.decode()
    section = page[page.index('id="contact-timeline"') :]
    return section[: section.index("</fieldset>")]


def rows(timeline: str) -> list[str]:
    return re.findall(r'<tr class="timeline-entry kind-([\w-]+)">', timeline)


def test_every_touchpoint_newest_first_with_its_details(client, django_user_model, grace):
    timeline = timeline_of(staff_client(client, django_user_model, SALES, MANAGERS), grace["contact"])

    assert rows(timeline) == [
        "taskcontacted", "docssigned_in", "leadcreated", "chatlinked", "prototype", "leadcreated",
    ]  # fmt: skip
    form, chat_lead, prototype = grace["form"], grace["chat_lead"], grace["prototype"]
    # The form's answers, on its lead.created.
    assert reverse("admin:leadgen_lead_change", args=[form.pk]) in timeline
    assert "<dt>teamSize</dt><dd>10-50</dd>" in timeline and "<dt>tools</dt><dd>Sheets, Xero</dd>" in timeline
    assert "Invoices!" in timeline
    # The chat: a link to it, the transcript's anchor below, its first message.
    session = ChatSession.objects.get()
    assert reverse("admin:chat_chatsession_change", args=[session.pk]) in timeline
    assert f'href="#chat-{session.pk}"' in timeline and "“Do you do Xero?”" in timeline
    assert reverse("admin:leadgen_lead_change", args=[chat_lead.pk]) in timeline
    # The prototype, its state now and its preview.
    assert reverse("admin:prototypes_prototype_change", args=[prototype.pk]) in timeline
    assert ">Completed</a>, Invoice bot" in timeline
    assert 'href="https://v0.example.dev/preview/grace" target="_blank" rel="noopener noreferrer"' in timeline
    # The docs sign-in and the task's outcome.
    assert reverse("admin:docs_users_trackeduser_change", args=[grace["reader"].pk]) in timeline
    assert reverse("admin:crm_task_change", args=[grace["task"].pk]) in timeline
    assert "by ana: Booked a call for Monday" in timeline


def test_each_detail_only_to_staff_who_may_read_it(client, django_user_model, grace):
    viewer = staff_client(client, django_user_model, permissions=["view_contact", "view_all_stores"])
    timeline = timeline_of(viewer, grace["contact"])

    assert rows(timeline) == ["taskcontacted", "docssigned_in", "leadcreated", "chatlinked", "leadcreated"]
    for hidden in ("10-50", "Invoices!", "Do you do Xero?", "Invoice bot", "v0.example.dev", "trackeduser", "/task/"):
        assert hidden not in timeline, hidden
    assert "A sales chat produced lead" in timeline and "Signed in to the docs" in timeline


def test_a_long_timeline_shows_the_latest_events_and_links_to_all_of_them(client, django_user_model, grace):
    contact = grace["contact"]
    TimelineEvent.objects.bulk_create(
        TimelineEvent(
            contact=contact, event_type="docs.signed_in", event_category="docs", entity_type="tracked_user",
            entity_id=str(grace["reader"].pk), occurred_at=T0 - timedelta(days=n), idempotency_key=f"seed:{n}",
        )
        for n in range(1, TIMELINE_LIMIT + 1)
    )  # fmt: skip
    viewer = staff_client(client, django_user_model, SALES, MANAGERS)

    timeline = timeline_of(viewer, contact)

    assert len(rows(timeline)) == TIMELINE_LIMIT + 1, "the latest events and the prototype among them"
    assert rows(timeline)[:2] == ["taskcontacted", "docssigned_in"]
    [link] = re.findall(r'href="([^"]*timelineevent/\?[^"]*)"', timeline)
    listing = viewer.get(link.replace("&amp;", "&"))
    assert listing.status_code == 200
    assert {event.contact_id for event in listing.context["cl"].result_list} == {contact.pk}
    assert listing.context["cl"].result_count == TimelineEvent.objects.filter(contact=contact).count()


def test_the_page_runs_as_many_queries_for_a_long_timeline_as_for_a_short_one(
    client, django_user_model, grace, django_assert_max_num_queries
):
    viewer = staff_client(client, django_user_model, SALES, MANAGERS)
    url = reverse("admin:crm_contact_change", args=[grace["contact"].pk])
    with django_assert_max_num_queries(60) as short:
        assert viewer.get(url).status_code == 200
    for n in range(5):  # more sign-ins, more leads with their chats
        activity.tracked_user_sign_in(
            sub="auth0|grace", channel="docs-login", email="grace@navy.example", at=timezone.now() + timedelta(n)
        )
        chat_services.chat_turn_start(session_id=f"chat-again-{n}", client_ip="192.0.2.7", content=f"Again {n}")
        arrive(client, at=T0 + timedelta(days=n + 1), session_id=f"chat-again-{n}")
    with django_assert_max_num_queries(60) as long:
        page = viewer.get(url).content.decode()
    assert page.count('class="timeline-entry kind-chatlinked"') == 6
    assert len(long) == len(short), [query["sql"][:120] for query in long]
