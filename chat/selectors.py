"""Reads of the sales chat."""

from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db.models import Count, Prefetch, Q
from django.utils import timezone

from chat.models import ChatMessage, ChatSession


def chat_session_client_ip(*, session_id: str) -> str | None:
    """The visitor IP a chat session was last seen from (the lookup's fallback when the agent omits X-User-IP)."""
    return ChatSession.objects.filter(session_id=session_id).values_list("client_ip", flat=True).first()


@dataclass(frozen=True)
class Transcript:
    session_id: str
    messages: list[ChatMessage]
    answering: bool  # the last message is the visitor's, still within the time the agent has to answer


def chat_transcript(*, session_id: str, limit: int = 200) -> Transcript | None:
    """The last `limit` messages of a session, oldest first; None for an unknown session."""
    session = ChatSession.objects.filter(session_id=session_id).only("id").first()
    if session is None:
        return None
    messages = list(reversed(ChatMessage.objects.filter(session=session).order_by("-created_at", "-id")[:limit]))
    answering = bool(
        messages
        and messages[-1].role == ChatMessage.Role.USER
        and messages[-1].created_at > timezone.now() - timedelta(seconds=settings.CHAT_AGENT_TIMEOUT_SECONDS + 5)
    )
    return Transcript(session_id=session_id, messages=messages, answering=answering)


def chat_sessions_of_lead(*, lead_id: int) -> list[ChatSession]:
    """The conversations that produced a lead, each with its messages, for the lead's admin page."""
    return chat_sessions_of_leads(lead_ids=[lead_id])


def chat_sessions_started_counts(*, start, end, store_ids=None) -> dict:
    """Chats first seen in [start, end): {chats, with_lead} (those that produced a lead, so far).

    A session belongs to a store through its lead (as in the chat admin): with `store_ids`, only the
    sessions whose lead is of those stores count. A session is last seen no earlier than first seen:
    last_seen_at >= start lets that column's index bound the scan.
    """
    sessions = ChatSession.objects.filter(last_seen_at__gte=start, first_seen_at__gte=start, first_seen_at__lt=end)
    if store_ids is not None:
        sessions = sessions.filter(lead__store__in=store_ids)
    return sessions.aggregate(chats=Count("pk"), with_lead=Count("pk", filter=Q(lead__isnull=False)))


def chat_sessions_linked(*, lead_ids) -> dict[int, list[ChatSession]]:
    """The conversations that produced each of these leads, without their messages: the session ids and when
    each began, in order, by lead id."""
    sessions = ChatSession.objects.filter(lead_id__in=lead_ids).only("session_id", "first_seen_at", "lead_id")
    linked: dict[int, list[ChatSession]] = {}
    for session in sessions.order_by("pk"):
        linked.setdefault(session.lead_id, []).append(session)
    return linked


def chat_sessions_of_leads(*, lead_ids) -> list[ChatSession]:
    """The conversations that produced any of these leads, oldest first, each with its messages in order."""
    messages = Prefetch("messages", queryset=ChatMessage.objects.order_by("created_at", "id"))
    return list(ChatSession.objects.filter(lead_id__in=lead_ids).prefetch_related(messages).order_by("first_seen_at"))


# --- data-subject requests (privacy/) ------------------------------------------------------------


def subject_rows(*, lead_ids, texts) -> dict[str, list[dict]]:
    """The conversations of the person, whole: those that produced one of the leads, and those in which a
    message names one of `texts` (their email or phone, given before any lead was made). {model label: rows}."""
    named = ChatMessage.objects.none()
    for text in texts:
        named |= ChatMessage.objects.filter(content__icontains=text)
    sessions = ChatSession.objects.filter(Q(lead__in=lead_ids) | Q(pk__in=named.values("session_id")))
    session_ids = list(sessions.order_by("pk").values_list("pk", flat=True))
    messages = ChatMessage.objects.filter(session__in=session_ids).order_by("session_id", "created_at", "pk")
    return {
        ChatSession._meta.label: list(ChatSession.objects.filter(pk__in=session_ids).order_by("pk").values()),
        ChatMessage._meta.label: list(messages.values()),
    }
