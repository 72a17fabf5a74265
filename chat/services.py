"""Writes of the sales chat: a turn's user message and its session, the answer, the lead link, retention."""

import json
from collections.abc import Sequence
from datetime import timedelta
from typing import NamedTuple

import structlog
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

import jobs
from chat.models import ChatMessage, ChatSession

logger = structlog.get_logger(__name__)

# Session ids are chosen by the widget (or the agent's caller): printable, bounded, safe in keys and URLs.
SESSION_ID_PATTERN = r"^[A-Za-z0-9_.:-]{1,128}$"
SESSION_ID_INVALID = "Enter a valid chat session id."
MAX_METADATA_BYTES = 16 * 1024
RETENTION_KIND = "chat.retention"


class Turn(NamedTuple):
    session_id: str
    client_ip: str | None
    content: str


class Answer(NamedTuple):
    session_pk: int
    content: str
    metadata: dict
    state: str


# A turn in one statement, so one round trip and no transaction to open and commit: the sessions upserted (new, or
# their IP and last seen moved on, not a read then a write), locked in session id order as chat_answers_save locks
# them so that the two never wait on each other in a cycle; then the messages.
_TURNS_START = """
WITH turn (session_id, client_ip, content) AS (VALUES {rows}),
session AS (
    INSERT INTO chat_chatsession (session_id, client_ip, first_seen_at, last_seen_at)
    SELECT session_id, client_ip, %s::timestamptz, %s::timestamptz FROM turn ORDER BY session_id
    ON CONFLICT (session_id) DO UPDATE SET last_seen_at = excluded.last_seen_at,
        client_ip = COALESCE(excluded.client_ip, chat_chatsession.client_ip)
    RETURNING id, session_id
),
message AS (
    INSERT INTO chat_chatmessage (session_id, role, content, metadata, state, created_at)
    SELECT session.id, %s::text, turn.content, %s::jsonb, %s::text, %s::timestamptz
    FROM turn JOIN session USING (session_id)
    RETURNING id, session_id
)
SELECT session.session_id, message.id, message.session_id FROM message JOIN session ON session.id = message.session_id
"""
_TURN_ROW = "(%s::text, %s::inet, %s::text)"


def chat_turns_start(turns: Sequence[Turn]) -> list[ChatMessage]:
    """Record visitors' messages and where their sessions are now (IP, last seen): before the agent is asked.

    The turns of many chats in one statement (chat.api batches them); their session ids must differ, as one
    upsert cannot touch a row twice.
    """
    now = timezone.now()
    user, state = ChatMessage.Role.USER, ChatMessage.State.COMPLETE
    params = [value for turn in turns for value in turn]
    params += [now, now, user.value, json.dumps({}), state.value, now]
    with connection.cursor() as cursor:
        cursor.execute(_TURNS_START.format(rows=", ".join([_TURN_ROW] * len(turns))), params)
        saved = {session_id: (message_pk, session_pk) for session_id, message_pk, session_pk in cursor.fetchall()}
    columns = [field.attname for field in ChatMessage._meta.concrete_fields]
    return [
        ChatMessage.from_db(connection.alias, columns, [*saved[turn.session_id], user, turn.content, {}, state, now])
        for turn in turns
    ]


def chat_turn_start(*, session_id: str, client_ip: str | None, content: str) -> ChatMessage:
    return chat_turns_start([Turn(session_id, client_ip, content)])[0]


# The answers in one statement, so one round trip and no transaction to open and commit: their sessions locked in
# session id order (as a turn locks them) and touched, then the answers written in the order given.
_ANSWERS_SAVE = """
WITH answer (n, session_id, content, metadata, state) AS (VALUES {rows}),
locked AS (
    SELECT id FROM chat_chatsession WHERE id IN (SELECT session_id FROM answer) ORDER BY session_id
    FOR NO KEY UPDATE
),
touched AS (
    UPDATE chat_chatsession SET last_seen_at = %s::timestamptz FROM locked WHERE chat_chatsession.id = locked.id
)
INSERT INTO chat_chatmessage (session_id, role, content, metadata, state, created_at)
SELECT session_id, %s::text, content, metadata, state, %s::timestamptz FROM answer ORDER BY n
RETURNING id
"""
_ANSWER_ROW = "(%s::integer, %s::bigint, %s::text, %s::jsonb, %s::text)"


def chat_answers_save(answers: Sequence[Answer]) -> list[ChatMessage]:
    """Record agents' answers (complete, partial or failed), each once when its stream has ended: the answers of
    many chats in one statement (chat.relay batches them)."""
    now = timezone.now()
    kept = [
        answer.metadata if len(json.dumps(answer.metadata, default=str)) <= MAX_METADATA_BYTES else {"truncated": True}
        for answer in answers
    ]
    params = [
        value
        for n, (answer, metadata) in enumerate(zip(answers, kept, strict=True))
        for value in (n, answer.session_pk, answer.content, json.dumps(metadata, default=str), answer.state)
    ]
    with connection.cursor() as cursor:
        rows = ", ".join([_ANSWER_ROW] * len(answers))
        cursor.execute(_ANSWERS_SAVE.format(rows=rows), [*params, now, ChatMessage.Role.ASSISTANT.value, now])
        pks = [pk for (pk,) in cursor.fetchall()]
    columns = [field.attname for field in ChatMessage._meta.concrete_fields]
    assistant = ChatMessage.Role.ASSISTANT
    return [
        ChatMessage.from_db(
            connection.alias, columns, [pk, answer.session_pk, assistant, answer.content, metadata, answer.state, now]
        )
        for pk, answer, metadata in zip(pks, answers, kept, strict=True)
    ]


def chat_answer_save(*, session_pk: int, content: str, metadata: dict, state: str) -> ChatMessage:
    """Record the agent's answer (complete, partial or failed) once, when its stream has ended."""
    return chat_answers_save([Answer(session_pk, content, metadata, state)])[0]


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
