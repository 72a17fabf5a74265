"""A signed-in user's Kapa chatbot engagement, read through Kapa's agent API.

Kapa's query API can neither filter threads by owner nor show the owner id, so
the engagement is read the way the chat widget reads its history: with a
session scoped to the user's owner id.

- `POST {KAPA_API_URL}/agent/v1/projects/{project}/agent/sessions/`, header
  `X-API-Key`, JSON `{"external_owner_id": ...}` mints a session token for that
  owner: `{"session_token": ..., "expires_at": ...}` (docs.kapa.ai/dev/agent/authentication).
- `GET /agent/v1/agent/threads/` lists the owner's threads a page at a time:
  `{"results": [{"id", "title", "message_count", "last_activity_at"}], "next_cursor"}`,
  `?cursor=` for the next page. The list carries no question text.
- `GET /agent/v1/agent/threads/{id}/` is one thread with its `messages`, each
  `{"role": "user" | "assistant", "content": ...}`: the questions are the
  user's messages.

The paths and the list and detail fields were checked against the live API by the
seed's authors. Two details are not in Kapa's public docs and follow its query
API instead: the session token goes in `Authorization: Bearer`, and pages are
`results` + `next_cursor`.

Bounded per user so a chatty user cannot eat the daily sync's time budget: every
page of the list (for the count and the last interaction), then the details of
the MAX_THREAD_DETAILS most recent threads only, stopping at MAX_QUESTIONS
questions. Kapa masks PII in question text at source (project setting), so the
questions are kept as they come.
"""

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

import structlog
from django.conf import settings
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from integrations.http import HttpClient
from integrations.kapa.competitors import competitor_rules, count_mentions
from integrations.kapa.identity import kapa_owner_id
from jobs.errors import PermanentError

logger = structlog.get_logger(__name__)

MAX_THREAD_DETAILS = 20
MAX_QUESTIONS = 25
PAGE_SIZE = 100
# A user with more threads than this is a bot or a loop on Kapa's side; stop paging.
MAX_PAGES = 50


@dataclass(frozen=True)
class KapaEngagement:
    thread_count: int
    last_interaction_at: datetime | None
    questions: list[str]  # newest first, at most MAX_QUESTIONS
    competitor_mentions: dict[str, int]  # competitor name -> questions naming it


class KapaClient(HttpClient):
    service = "kapa"

    def __init__(self, base_url: str, *, api_key: str, project_id: str, competitors: Iterable[str] = (), **kwargs):
        super().__init__(base_url, **kwargs)
        self.api_key = api_key
        self.project_id = project_id
        self.competitor_rules = competitor_rules(competitors)

    def fetch_engagement(self, sub: str) -> KapaEngagement:
        """The engagement of the user with this identity-provider subject."""
        token = self._owner_session_token(kapa_owner_id(sub))
        threads = list(self._threads(token))
        newest_first = sorted(threads, key=lambda thread: _last_activity(thread) or _NEVER, reverse=True)
        questions: list[str] = []
        for thread in newest_first[:MAX_THREAD_DETAILS]:
            if len(questions) >= MAX_QUESTIONS:
                break
            questions.extend(self._questions(token, thread["id"])[: MAX_QUESTIONS - len(questions)])
        return KapaEngagement(
            thread_count=len(threads),
            last_interaction_at=_last_activity(newest_first[0]) if threads else None,
            questions=questions,
            competitor_mentions=count_mentions(questions, self.competitor_rules),
        )

    def _owner_session_token(self, owner_id: str) -> str:
        answer = self.post(
            f"agent/v1/projects/{self.project_id}/agent/sessions/",
            json={"external_owner_id": owner_id},
            headers={"X-API-Key": self.api_key},
        ).json()
        token = answer.get("session_token") if isinstance(answer, dict) else None
        if not isinstance(token, str) or not token:
            raise PermanentError("kapa: the session answer carries no session_token")
        return token

    def _threads(self, token: str) -> Iterator[dict]:
        params = {"page_size": PAGE_SIZE}
        seen_cursors = set()
        for _ in range(MAX_PAGES):
            page = self.get("agent/v1/agent/threads/", params=params, headers=_bearer(token)).json()
            results = page.get("results") if isinstance(page, dict) else None
            if not isinstance(results, list) or not all(isinstance(t, dict) and t.get("id") for t in results):
                raise PermanentError("kapa: unexpected threads page")
            yield from results
            cursor = page.get("next_cursor")
            if not cursor:
                return
            if cursor in seen_cursors:
                raise PermanentError("kapa: the threads list repeats a page cursor")
            seen_cursors.add(cursor)
            params = {"page_size": PAGE_SIZE, "cursor": cursor}
        logger.warning("kapa_threads_truncated", pages=MAX_PAGES)

    def _questions(self, token: str, thread_id: str) -> list[str]:
        """The user's messages in the thread, newest first."""
        thread = self.get(f"agent/v1/agent/threads/{thread_id}/", headers=_bearer(token)).json()
        messages = thread.get("messages") if isinstance(thread, dict) else None
        if not isinstance(messages, list):
            raise PermanentError("kapa: unexpected thread detail")
        questions = [
            message["content"].strip()
            for message in messages
            if isinstance(message, dict) and message.get("role") == "user" and isinstance(message.get("content"), str)
        ]
        return [question for question in reversed(questions) if question]


def client_from_settings() -> KapaClient | None:
    """None while KAPA_API_KEY or KAPA_PROJECT_ID is empty: engagement is not fetched."""
    if not (settings.KAPA_API_KEY and settings.KAPA_PROJECT_ID):
        return None
    return KapaClient(
        settings.KAPA_API_URL,
        api_key=settings.KAPA_API_KEY,
        project_id=settings.KAPA_PROJECT_ID,
        competitors=settings.KAPA_COMPETITORS,
    )


def _bearer(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


_NEVER = datetime.min.replace(tzinfo=UTC)


def _last_activity(thread: dict) -> datetime | None:
    value = thread.get("last_activity_at")
    moment = parse_datetime(value) if isinstance(value, str) else None
    # Kapa writes UTC; a stamp without an offset is read as UTC so it compares with the rest.
    return timezone.make_aware(moment, UTC) if moment and timezone.is_naive(moment) else moment
