"""Writes of the sales chat: a turn's user message and its session, the answer, the lead link, retention."""

import json
from datetime import timedelta

import structlog
from django.conf import settings
from django.db import transaction
from django.utils import timezone

import jobs
from chat.models import ChatMessage, ChatSession
from config.db import insert_on_conflict

logger = structlog.get_logger(__name__)

# Session ids are chosen by the widget (or the agent's caller): printable, bounded, safe in keys and URLs.
SESSION_ID_PATTERN = r"^[A-Za-z0-9_.:-]{1,128}$"
SESSION_ID_INVALID = "Enter a valid chat session id."
MAX_METADATA_BYTES = 16 * 1024
RETENTION_KIND = "chat.retention"


@transaction.atomic
def chat_turn_start(*, session_id: str, client_ip: str | None, content: str) -> ChatMessage:
    """Record the visitor's message and where the session is now (its IP, last seen): before the agent is asked.

    The session is one upsert (new, or its IP and last seen moved on), not a read then a write.
    """
    (session_pk,) = insert_on_conflict(
        ChatSession(session_id=session_id, client_ip=client_ip),
        on_conflict="ON CONFLICT (session_id) DO UPDATE SET last_seen_at = excluded.last_seen_at,"
        " client_ip = COALESCE(excluded.client_ip, chat_chatsession.client_ip)",
        returning="id",
    )
    return ChatMessage.objects.create(session_id=session_pk, role=ChatMessage.Role.USER, content=content)


def chat_answer_save(*, session_pk: int, content: str, metadata: dict, state: str) -> ChatMessage:
    """Record the agent's answer (complete, partial or failed) once, when its stream has ended."""
    if len(json.dumps(metadata, default=str)) > MAX_METADATA_BYTES:
        metadata = {"truncated": True}
    with transaction.atomic():
        message = ChatMessage.objects.create(
            session_id=session_pk, role=ChatMessage.Role.ASSISTANT, content=content, metadata=metadata, state=state
        )
        ChatSession.objects.filter(pk=session_pk).update(last_seen_at=timezone.now())
    return message


@transaction.atomic
def chat_session_link_lead(*, session_id: str, lead_id: int) -> None:
    """Link the lead the agent created to the conversation that produced it (the session may be new to us)."""
    session, _ = ChatSession.objects.get_or_create(session_id=session_id)
    ChatSession.objects.filter(pk=session.pk).update(lead_id=lead_id)


def chat_retention_start() -> None:
    """Queue a retention pass; triggers within the same minute share one job."""
    jobs.enqueue(RETENTION_KIND, {"part": 1}, key=f"{RETENTION_KIND}:{timezone.now():%Y-%m-%dT%H:%M}")


def chat_retention_run(*, job_key: str, part: int) -> int:
    """Delete one batch of expired transcripts; a full batch queues the next part."""
    deleted = chat_sessions_delete_expired(batch_size=settings.CHAT_RETENTION_BATCH)
    if deleted == settings.CHAT_RETENTION_BATCH:
        jobs.enqueue(RETENTION_KIND, {"part": part + 1}, key=f"{job_key.split('#', 1)[0]}#{part + 1}")
    logger.info("chat_retention_done", deleted=deleted, part=part)
    return deleted


@transaction.atomic
def chat_sessions_delete_expired(*, batch_size: int) -> int:
    """Delete up to `batch_size` sessions quiet for CHAT_RETENTION_DAYS, oldest first, with their messages.

    The lead a session produced stays: it follows the lead data rules of its own.
    """
    expired = ChatSession.objects.filter(last_seen_at__lt=timezone.now() - timedelta(days=settings.CHAT_RETENTION_DAYS))
    ids = list(expired.order_by("last_seen_at").values_list("id", flat=True)[:batch_size])
    # Re-checked in the DELETE: a session that came back since the SELECT is kept.
    ids = list(expired.filter(id__in=ids).select_for_update().values_list("id", flat=True))
    ChatMessage.objects.filter(session_id__in=ids).delete()
    deleted, _ = ChatSession.objects.filter(id__in=ids).delete()
    return deleted


# --- data-subject requests (privacy/) ------------------------------------------------------------


@transaction.atomic
def subject_erase(*, session_ids) -> dict[str, int]:
    """Delete these conversations with their messages. {model label: rows deleted}."""
    return ChatSession.objects.filter(pk__in=session_ids).delete()[1]
