"""What a chat leaves behind: the transcript endpoint, the session's IP for the lookup, the lead link,
the admin pages sales staff read it in, and retention."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone

from chat import services
from chat.api import widget_token_issue
from chat.models import ChatMessage, ChatSession
from jobs.models import Job
from leadgen.models import Lead
from tests.chat.conftest import CHAT_KEY, SESSION, chat_request
from tests.tracking.support import run_jobs

LEAD = {
    "firstName": "Ada",
    "lastName": "Lovelace",
    "email": "ada@analytical.example",
    "message": "We would like a prototype of our order intake.",
    "serviceType": "diagnostic",
}


def transcript(client, session_id=SESSION, **headers):
    return client.get(f"/api/chat/sessions/{session_id}/messages", **headers)


@pytest.mark.django_db(transaction=True)
def test_the_transcript_shows_what_was_said_to_the_key_and_to_the_sessions_widget(client, fake_agent):
    chat_request({"sessionId": SESSION, "message": "Hi there"})
    fake_agent.mode = "drop"
    chat_request({"sessionId": SESSION, "message": "And the price?"})

    body = transcript(client, HTTP_X_CHAT_API_KEY=CHAT_KEY).json()
    assert body["sessionId"] == SESSION and body["answering"] is False
    assert [(m["role"], m["content"], m["state"]) for m in body["messages"]] == [
        ("user", "Hi there", "complete"),
        ("assistant", fake_agent.full_answer, "complete"),
        ("user", "And the price?", "complete"),
        ("assistant", fake_agent.said_before_cut(), "partial"),
    ]
    widget = transcript(client, HTTP_X_CHAT_WIDGET_TOKEN=widget_token_issue(SESSION))
    assert widget.json() == body


@pytest.mark.django_db
def test_the_transcript_is_refused_without_the_key_or_for_another_session(client):
    services.chat_turn_start(session_id=SESSION, client_ip=None, content="Hi")
    assert transcript(client).status_code == 401
    assert transcript(client, HTTP_X_CHAT_API_KEY="wrong").status_code == 401
    assert transcript(client, HTTP_X_CHAT_WIDGET_TOKEN=widget_token_issue("other")).status_code == 401
    assert transcript(client, HTTP_X_CHAT_WIDGET_TOKEN="forged:token").status_code == 401
    assert transcript(client, "unknown", HTTP_X_CHAT_API_KEY=CHAT_KEY).status_code == 404


@pytest.mark.django_db
def test_a_question_waiting_for_its_answer_is_shown_as_answering(client):
    services.chat_turn_start(session_id=SESSION, client_ip=None, content="Hi")
    assert transcript(client, HTTP_X_CHAT_API_KEY=CHAT_KEY).json()["answering"] is True
    ChatMessage.objects.update(created_at=timezone.now() - timedelta(hours=1))
    assert transcript(client, HTTP_X_CHAT_API_KEY=CHAT_KEY).json()["answering"] is False, "the agent gave up long ago"


@pytest.mark.django_db(transaction=True)
def test_the_lookup_finds_the_visitors_ip_through_a_real_chat_session(client, fake_agent):
    chat_request({"sessionId": SESSION, "message": "Hello"}, headers={"X-User-IP": "203.0.113.70"})
    # The agent creates a prototype lead for the visitor: the IP bucket is now held.
    created = client.post(
        "/api/leads", LEAD, content_type="application/json", HTTP_X_CHAT_API_KEY=CHAT_KEY, HTTP_X_USER_IP="203.0.113.70"
    )
    assert created.status_code == 200, created.content

    with_session = client.get(
        "/api/leads/lookup", {"email": "other@example.com", "sessionId": SESSION}, HTTP_X_CHAT_API_KEY=CHAT_KEY
    ).json()
    assert with_session["rateLimit"]["ip"]["inProgress"] is True, "the session's IP bucket, held by the lead"
    without = client.get("/api/leads/lookup", {"email": "other@example.com"}, HTTP_X_CHAT_API_KEY=CHAT_KEY).json()
    assert without["rateLimit"]["ip"] is None


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("how", ["body", "header"])
def test_a_lead_the_agent_creates_is_linked_to_its_chat_and_shown_on_the_lead(client, admin_client, fake_agent, how):
    chat_request({"sessionId": SESSION, "message": "I want a diagnostic for my shop"})
    extra = {"HTTP_X_CHAT_SESSION_ID": SESSION} if how == "header" else {}
    body = {**LEAD, "sessionId": SESSION} if how == "body" else LEAD
    response = client.post("/api/leads", body, content_type="application/json", HTTP_X_CHAT_API_KEY=CHAT_KEY, **extra)
    assert response.status_code == 200, response.content

    lead = Lead.objects.get()
    assert ChatSession.objects.get(session_id=SESSION).lead == lead
    page = admin_client.get(f"/admin/leadgen/lead/{lead.pk}/change/").content.decode()
    assert "I want a diagnostic for my shop" in page and fake_agent.full_answer in page


@pytest.mark.django_db
def test_only_the_chat_agent_links_leads_and_bad_session_ids_are_a_400(client):
    response = client.post("/api/leads", {**LEAD, "sessionId": SESSION}, content_type="application/json")
    assert response.status_code == 200
    assert not ChatSession.objects.exists(), "the public form cannot attach itself to a conversation"
    bad = client.post(
        "/api/leads", LEAD, content_type="application/json", HTTP_X_CHAT_API_KEY=CHAT_KEY,
        HTTP_X_CHAT_SESSION_ID="no spaces allowed",
    )  # fmt: skip
    assert bad.status_code == 400 and "X-Chat-Session-Id" in bad.json()["error"]["fields"]
    assert Lead.objects.count() == 1


@pytest.mark.django_db
def test_sales_staff_search_transcripts_and_only_read_them(client, staff_user):
    for session_id, words in (("s-pricing", "How much is a dedicated team?"), ("s-hello", "Hello")):
        services.chat_turn_start(session_id=session_id, client_ip="192.0.2.1", content=words)
    client.force_login(staff_user("sales", "Sales", "Managers"))  # chats of no lead belong to no store

    found = client.get("/admin/chat/chatsession/", {"q": "dedicated team"}).content.decode()
    assert "s-pricing" in found and "s-hello" not in found
    by_id = client.get("/admin/chat/chatsession/", {"q": "s-hello"}).content.decode()
    assert "s-hello" in by_id and "s-pricing" not in by_id
    session = ChatSession.objects.get(session_id="s-pricing")
    page = client.get(f"/admin/chat/chatsession/{session.pk}/change/")
    assert page.status_code == 200 and "How much is a dedicated team?" in page.content.decode()
    assert client.post(f"/admin/chat/chatsession/{session.pk}/delete/", {"post": "yes"}).status_code == 403
    assert ChatSession.objects.filter(pk=session.pk).exists()
    assert Group.objects.get(name="Sales").permissions.filter(codename="view_chatmessage").exists()


@pytest.mark.django_db
def test_retention_deletes_quiet_transcripts_in_batches_and_keeps_the_lead(settings):
    settings.CHAT_RETENTION_DAYS, settings.CHAT_RETENTION_BATCH = 90, 2
    lead = Lead.objects.create(first_name="Ada", email="ada@analytical.example")
    for index in range(5):
        services.chat_turn_start(session_id=f"old-{index}", client_ip="192.0.2.1", content="old question")
    services.chat_session_link_lead(session_id="old-0", lead_id=lead.pk)
    ChatSession.objects.update(last_seen_at=timezone.now() - timedelta(days=91))
    services.chat_turn_start(session_id="recent", client_ip="192.0.2.1", content="new question")
    ChatSession.objects.filter(session_id="recent").update(last_seen_at=timezone.now() - timedelta(days=89))

    from chat.tasks import retention

    retention()  # the beat task only queues the job
    assert ChatSession.objects.count() == 6
    while run_jobs(services.RETENTION_KIND):
        pass
    assert list(ChatSession.objects.values_list("session_id", flat=True)) == ["recent"]
    assert list(ChatMessage.objects.values_list("content", flat=True)) == ["new question"]
    assert Lead.objects.filter(pk=lead.pk).exists()
    assert Job.objects.filter(kind=services.RETENTION_KIND).count() == 3  # 2 + 2 + 1: each full batch queued the next


def test_retention_is_scheduled_daily():
    from foundation.schedules import PERIODIC_TASKS

    assert PERIODIC_TASKS["chat: delete expired transcripts"]["task"] == "chat.retention"


@pytest.mark.django_db
def test_staff_of_a_store_see_only_the_conversations_of_its_leads(client, staff_user):
    from stores.models import Store

    downtown = Store.objects.create(franchise="Acme", name="Downtown", account_id="a-1")
    uptown = Store.objects.create(franchise="Acme", name="Uptown", account_id="a-2")
    for session_id, store in (("s-downtown", downtown), ("s-uptown", uptown)):
        lead = Lead.objects.create(first_name="Ada", email=f"{session_id}@example.com", store=store)
        services.chat_turn_start(session_id=session_id, client_ip=None, content=f"Hello from {session_id}")
        services.chat_session_link_lead(session_id=session_id, lead_id=lead.pk)
    user = staff_user("downtown-sales", "Sales")
    downtown.staff.add(user)
    client.force_login(user)

    listing = client.get("/admin/chat/chatsession/").content.decode()
    assert "s-downtown" in listing and "s-uptown" not in listing
    other = ChatSession.objects.get(session_id="s-uptown")
    assert client.get(f"/admin/chat/chatsession/{other.pk}/change/").status_code == 404
