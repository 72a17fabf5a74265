"""The contact page shows the chat transcripts and the prototypes of the contact's leads: read-only, in order,
only the contact's own (its store's), only to staff who may read chats and prototypes, in a fixed number of
queries."""

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from chat.models import ChatMessage
from crm.models import Task
from foundation.staff_groups import SALES

pytestmark = pytest.mark.django_db


@pytest.fixture
def contact_world(make_email_lead, downtown, uptown, staff, conversation, completed_prototype):
    lead = make_email_lead(downtown, phone="+14155550101")
    conversation(
        "chat-downtown-1",
        lead,
        [
            ("Do you have evening classes?", "Yes, until 9pm every weekday.", ChatMessage.State.COMPLETE),
            ("Can I book a trial?", "Of course, I can", ChatMessage.State.PARTIAL),
        ],
    )
    prototype = completed_prototype(lead, "https://v0.example.dev/preview/abc")
    other = make_email_lead(uptown, phone="+14155550199")
    conversation("chat-uptown-1", other, [("Uptown question", "Uptown answer", ChatMessage.State.COMPLETE)])
    completed_prototype(other, "https://v0.example.dev/preview/uptown")
    return {
        "contact": Task.objects.get(source_lead=lead).contact,
        "other_contact": Task.objects.get(source_lead=other).contact,
        "prototype": prototype,
        "sales": staff("ana", SALES, stores=[downtown]),
        "uptown_sales": staff("ulla", SALES, stores=[uptown]),
        "contacts_only": staff("cora", stores=[downtown]),
    }


def contact_url(contact):
    return reverse("admin:crm_contact_change", args=[contact.pk])


def test_the_transcript_in_order_with_role_and_state_and_the_prototype(client, contact_world):
    client.force_login(contact_world["sales"])
    page = client.get(contact_url(contact_world["contact"])).content.decode()

    chats = page[page.index('id="contact-chats"') :]
    said = [
        "Do you have evening classes?", "Yes, until 9pm every weekday.", "Can I book a trial?", "Of course, I can",
    ]  # fmt: skip
    positions = [chats.index(text) for text in said]
    assert positions == sorted(positions)  # oldest first, question before its answer
    assert chats.count('class="message role-user state-complete"') == 2
    assert 'class="message role-assistant state-complete"' in chats
    assert 'class="message role-assistant state-partial"' in chats
    assert "Uptown" not in page  # another store's contact, chat and prototype
    prototypes = page[page.index('id="contact-prototypes"') : page.index('id="contact-chats"')]
    prototype = contact_world["prototype"]
    assert reverse("admin:prototypes_prototype_change", args=[prototype.pk]) in prototypes
    assert ">Completed<" in prototypes and "Gym booking app" in prototypes
    assert 'href="https://v0.example.dev/preview/abc" target="_blank" rel="noopener noreferrer"' in prototypes
    assert "<textarea" not in chats and "<input" not in prototypes  # read-only


def test_another_stores_contact_is_a_404_and_shows_only_its_own_chat(client, contact_world):
    client.force_login(contact_world["uptown_sales"])
    assert client.get(contact_url(contact_world["contact"])).status_code == 404
    page = client.get(contact_url(contact_world["other_contact"])).content.decode()
    assert "Uptown question" in page and "v0.example.dev/preview/uptown" in page
    assert "evening classes" not in page and "preview/abc" not in page


def test_staff_who_may_read_contacts_but_not_chats_or_prototypes_see_neither(client, contact_world):
    user = contact_world["contacts_only"]
    user.user_permissions.add(Permission.objects.get(codename="view_contact"))
    client.force_login(user)
    page = client.get(contact_url(contact_world["contact"])).content.decode()
    assert "Do you have evening classes?" not in page and "preview/abc" not in page
    user.user_permissions.add(Permission.objects.get(codename="view_prototype"))
    page = client.get(contact_url(contact_world["contact"])).content.decode()
    assert 'id="contact-prototypes"' in page and 'id="contact-chats"' not in page


def test_a_contact_without_chat_or_prototype_shows_neither(client, make_email_lead, downtown, staff):
    contact = Task.objects.get(source_lead=make_email_lead(downtown)).contact
    client.force_login(staff("ana", SALES, stores=[downtown]))
    page = client.get(contact_url(contact)).content.decode()
    assert 'id="contact-chats"' not in page and 'id="contact-prototypes"' not in page


def test_the_contact_page_runs_as_many_queries_for_many_chats_as_for_one(
    client, contact_world, make_email_lead, downtown, conversation, completed_prototype, django_assert_max_num_queries
):
    client.force_login(contact_world["sales"])
    contact = contact_world["contact"]
    with django_assert_max_num_queries(40) as one_chat:
        assert client.get(contact_url(contact)).status_code == 200
    # The same person writes again twice (same phone, same store: the same contact), each time through a chat.
    for n in range(2):
        lead = make_email_lead(downtown, phone=contact.phone)
        turns = [(f"question {n}.{k}", f"answer {n}.{k}", ChatMessage.State.COMPLETE) for k in range(4)]
        conversation(f"chat-downtown-again-{n}", lead, turns)
        completed_prototype(lead, f"https://v0.example.dev/preview/again-{n}")
    with django_assert_max_num_queries(40) as three_chats:
        page = client.get(contact_url(contact)).content.decode()
    assert page.count('class="chat-transcript"') == 3 and page.count('class="prototype state-completed"') == 3
    assert len(three_chats) == len(one_chat), [q["sql"][:120] for q in three_chats]
