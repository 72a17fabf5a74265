"""Kapa, one client: the docs search and answers of the MCP tools, and a signed-in user's chatbot engagement.

Which Kapa endpoint each method calls, and what it reads of the answer:

- `search` is Kapa's Retrieval (query API): `POST /query/v1/projects/{project}/retrieval/`,
  header `X-API-KEY`, JSON `{"query", "top_k"}` (and `integration_id` when set). No answer is
  generated; the chunks come back best first as a JSON list of `{"source_url", "content"}`.
  `content` is Markdown whose first line is the chunk's breadcrumb heading
  (`# Guide > Section > Page`), the only title a chunk carries: its last part is the title,
  the rest is the snippet. Kapa takes `top_k` from 1 to 15.
- `ask` is Kapa's Chat (query API): `POST /query/v1/projects/{project}/chat/`, header
  `X-API-KEY`, JSON `{"query", "user": {"unique_client_id": <owner id>}}` (and
  `integration_id`). Each call starts a new thread, attributed to the user by the same owner
  id the docs site uses, so the sub itself never reaches Kapa. The answer is
  `{"answer", "thread_id", "question_answer_id", "is_uncertain", "relevant_sources":
  [{"source_url", "title"}]}`, not streamed.
- `fetch_engagement` reads the user's threads with the chat widget (Kapa's agent API), the
  only place Kapa files them by owner (its query API can neither filter threads by owner
  nor show the owner id):
  - `POST /agent/v1/projects/{project}/agent/sessions/`, header `X-API-Key`, JSON
    `{"external_owner_id": ...}` mints a session for that owner:
    `{"session_token", "expires_at"}` (an hour);
  - `GET /agent/v1/agent/threads/` lists the owner's threads a page at a time:
    `{"results": [{"id", "title", "message_count", "last_activity_at"}], "next_cursor"}`,
    `?cursor=` for the next page; the list carries no question text;
  - `GET /agent/v1/agent/threads/{id}/` is one thread with its `messages`, each
    `{"role": "user" | "assistant", "content"}`: the questions are the user's messages.
  Threads started through `ask` (the Chat API) are not in this list: Kapa keeps them
  apart, so the tracking app records them as they are asked and merges them in.
  The session call is in Kapa's docs. The two thread calls are the ones the widget's
  history makes; their paths and fields are as Kapa's live API answers them, and two
  details follow Kapa's other APIs because its docs do not state them: the session token
  goes in `Authorization: Bearer`, and pages are `results` + `next_cursor`.

Kapa refuses a bad key with 401 or 403, bad input with 400 and per-field lists, an unknown
project with 404, all with a JSON body (`{"detail": ...}`); too many calls with 429 and
Retry-After. HttpClient maps them: 429 and 5xx are transient, other 4xx permanent.

The engagement is bounded per user so a chatty user cannot eat the daily sync's time
budget: every page of the list (for the count and the last interaction), then the details
of the MAX_THREAD_DETAILS most recent threads only, stopping at MAX_QUESTIONS questions.
Kapa masks PII in question text at source (project setting), so the questions are kept as
they come.
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
from jobs import PermanentError

logger = structlog.get_logger(__name__)

MAX_THREAD_DETAILS = 20
MAX_QUESTIONS = 25
PAGE_SIZE = 100
MAX_TOP_K = 15  # the most chunks Kapa's retrieval returns
# A user with more threads than this is a bot or a loop on Kapa's side; stop paging.
MAX_PAGES = 50


@dataclass(frozen=True)
class KapaEngagement:
    thread_count: int
    last_interaction_at: datetime | None
    questions: list[str]  # newest first, at most MAX_QUESTIONS
    # Parallel to `questions`: the last activity of each one's thread (Kapa dates threads, not messages).
    question_dates: list[datetime | None]
    competitor_mentions: dict[str, int]  # competitor name -> questions naming it


@dataclass(frozen=True)
class DocsChunk:
    title: str
    url: str
    content: str


@dataclass(frozen=True)
class DocsAnswer:
    answer: str
    thread_id: str
    uncertain: bool  # Kapa's own flag: the sources did not settle the question
    sources: list[DocsChunk]  # title and url; no content


class KapaClient(HttpClient):
    service = "kapa"

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str,
        project_id: str,
        integration_id: str = "",
        competitors: Iterable[str] = (),
        **kwargs,
    ):
        super().__init__(base_url, **kwargs)
        self.api_key = api_key
        self.project_id = project_id
        self.integration_id = integration_id
        self.competitor_rules = competitor_rules(competitors)

    def fetch_engagement(self, sub: str) -> KapaEngagement:
        """The engagement of the user with this identity-provider subject."""
        token = self._owner_session_token(kapa_owner_id(sub))
        threads = list(self._threads(token))
        newest_first = sorted(threads, key=lambda thread: _last_activity(thread) or _NEVER, reverse=True)
        questions: list[str] = []
        question_dates: list[datetime | None] = []
        for thread in newest_first[:MAX_THREAD_DETAILS]:
            if len(questions) >= MAX_QUESTIONS:
                break
            asked = self._questions(token, thread["id"])[: MAX_QUESTIONS - len(questions)]
            questions.extend(asked)
            question_dates.extend([_last_activity(thread)] * len(asked))
        return KapaEngagement(
            thread_count=len(threads),
            last_interaction_at=_last_activity(newest_first[0]) if threads else None,
            questions=questions,
            question_dates=question_dates,
            competitor_mentions=count_mentions(questions, self.competitor_rules),
        )

    def search(self, query: str, *, limit: int = 5) -> list[DocsChunk]:
        """The docs chunks most relevant to the query, best first (Retrieval)."""
        body = {"query": query, "top_k": max(1, min(limit, MAX_TOP_K)), **self._integration()}
        chunks = self.post(
            f"query/v1/projects/{self.project_id}/retrieval/", json=body, headers=self._api_key_header()
        ).json()
        if not isinstance(chunks, list):
            raise PermanentError("kapa: the retrieval answer is not a list")
        return [_retrieved_chunk(item) for item in chunks if _has_text(item, "source_url", "content")]

    def ask(self, sub: str, question: str) -> DocsAnswer:
        """Kapa's answer in a new thread attributed to the user's owner id (Chat)."""
        body = {"query": question, "user": {"unique_client_id": kapa_owner_id(sub)}, **self._integration()}
        answer = self.post(
            f"query/v1/projects/{self.project_id}/chat/", json=body, headers=self._api_key_header()
        ).json()
        if not isinstance(answer, dict) or not isinstance(answer.get("answer"), str):
            raise PermanentError("kapa: the chat answer carries no answer")
        sources = answer.get("relevant_sources") if isinstance(answer.get("relevant_sources"), list) else []
        return DocsAnswer(
            answer=answer["answer"],
            thread_id=str(answer.get("thread_id") or ""),
            uncertain=answer.get("is_uncertain") is True,
            sources=[
                DocsChunk(title=str(item.get("title") or item["source_url"]), url=item["source_url"], content="")
                for item in sources
                if _has_text(item, "source_url")
            ],
        )

    def _api_key_header(self) -> dict:
        return {"X-API-KEY": self.api_key}

    def _integration(self) -> dict:
        """Kapa files calls without an integration id under its default integration."""
        return {"integration_id": self.integration_id} if self.integration_id else {}

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


def _has_text(item, *fields: str) -> bool:
    return isinstance(item, dict) and all(isinstance(item.get(field), str) and item[field] for field in fields)


def _retrieved_chunk(item: dict) -> DocsChunk:
    """Title from the chunk's breadcrumb heading (`# Guide > Page`), else its URL; the rest is the text."""
    first_line, _, rest = item["content"].partition("\n")
    if first_line.startswith("# "):
        title, text = first_line[2:].rsplit(" > ", 1)[-1].strip(), rest.strip()
    else:
        title, text = "", item["content"].strip()
    return DocsChunk(title=title or item["source_url"], url=item["source_url"], content=text)


def _bearer(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


_NEVER = datetime.min.replace(tzinfo=UTC)


def _last_activity(thread: dict) -> datetime | None:
    value = thread.get("last_activity_at")
    moment = parse_datetime(value) if isinstance(value, str) else None
    # Kapa writes UTC; a stamp without an offset is read as UTC so it compares with the rest.
    return timezone.make_aware(moment, UTC) if moment and timezone.is_naive(moment) else moment
