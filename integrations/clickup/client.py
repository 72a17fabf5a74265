"""ClickUp API v2: lead alerts as tasks in one list (a "Lead alerts" list).

A task rather than a Chat message: the task endpoint is the stable v2 API
(Chat lives in the newer v3 API), a task notifies the list's watchers at
once, can be assigned and closed once someone has called the lead, and the
list doubles as a record of every alert. The alert text is composed by the
caller; this client only delivers it.

Reference: https://developer.clickup.com/reference/createtask and the Tasks
guide. Personal tokens (`pk_...`) go in the `Authorization` header as they
are, without "Bearer". The markdown body is sent as `markdown_content`, the
field the Create Task reference documents (it takes precedence over the
plain `description`).
"""

import re
from dataclasses import dataclass
from enum import IntEnum

from django.conf import settings

from integrations.http import HttpClient
from jobs import PermanentError, TransientError

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~:])")
_BACKTICK_RUN = re.compile(r"`+")


def markdown_text(text: str) -> str:
    """Text a visitor typed, shown as typed in ClickUp's Markdown: every Markdown character escaped, so no
    link, image, heading or emphasis can be planted; "://" and "www." escaped too, so nothing autolinks."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", " ".join(str(text).split()))


def markdown_block(text: str) -> str:
    """Longer visitor text as a fenced code block (nothing inside is rendered), its fence longer than any
    run of backticks in it so the text cannot close it."""
    fence = "`" * max(3, 1 + max((len(run) for run in _BACKTICK_RUN.findall(text)), default=0))
    return f"{fence}text\n{text}\n{fence}"


class Priority(IntEnum):
    URGENT = 1
    HIGH = 2
    NORMAL = 3
    LOW = 4


@dataclass(frozen=True)
class ClickUpTask:
    id: str
    url: str


class ClickUpClient(HttpClient):
    service = "clickup"

    def __init__(self, api_token: str, *, list_id: str, base_url: str = "https://api.clickup.com"):
        super().__init__(base_url)
        self.headers["Authorization"] = api_token
        self.list_id = list_id

    def create_task(
        self, *, name: str, markdown_content: str, priority: Priority | None = None, tags: tuple[str, ...] = ()
    ) -> ClickUpTask:
        """Create a task in the configured list. ClickUp has no idempotency key: record the task id once
        created, and on a retry look for it first (`find_task`)."""
        body: dict = {"name": name, "markdown_content": markdown_content}
        if priority is not None:
            body["priority"] = int(priority)
        if tags:
            body["tags"] = list(tags)
        response = self.post(f"api/v2/list/{self.list_id}/task", json=body)
        try:
            task = response.json()
        except ValueError as exc:
            # A 2xx that is not JSON comes from something in between (a proxy, a maintenance page).
            raise TransientError("clickup: answer was not JSON") from exc
        if not isinstance(task, dict) or not isinstance(task.get("id"), str) or not task["id"]:
            raise PermanentError("clickup: task created without an id")
        return ClickUpTask(id=task["id"], url=str(task.get("url") or ""))

    def find_task(self, *, marker: str, tag: str, created_after_ms: int, created_before_ms: int) -> ClickUpTask | None:
        """A task of the list with `tag`, created between the two times (Unix ms), whose description
        contains `marker`; None when there is none.

        GET /list/{id}/task (Get Tasks) reads the list itself, filtered by tag and
        creation date, a page of up to 100 tasks at a time.
        """
        page = 0
        while True:
            response = self.get(
                f"api/v2/list/{self.list_id}/task",
                params={
                    "tags[]": tag,
                    "date_created_gt": created_after_ms,
                    "date_created_lt": created_before_ms,
                    "include_closed": "true",
                    "include_markdown_description": "true",
                    "page": page,
                },
            )
            try:
                answer = response.json()
            except ValueError as exc:
                raise TransientError("clickup: answer was not JSON") from exc
            tasks = answer.get("tasks") if isinstance(answer, dict) else None
            if not isinstance(tasks, list):
                raise PermanentError("clickup: unexpected answer")
            for task in filter(lambda task: isinstance(task, dict), tasks):
                text = f"{task.get('markdown_description') or ''}\n{task.get('description') or ''}"
                if marker in text and isinstance(task.get("id"), str):
                    return ClickUpTask(id=task["id"], url=str(task.get("url") or ""))
            if answer.get("last_page", True) or not tasks:
                return None
            page += 1


def client_from_settings() -> ClickUpClient | None:
    """None unless CLICKUP_API_TOKEN and CLICKUP_LIST_ID are set: the job handler records the job as skipped."""
    if not (settings.CLICKUP_API_TOKEN and settings.CLICKUP_LIST_ID):
        return None
    return ClickUpClient(
        settings.CLICKUP_API_TOKEN, list_id=settings.CLICKUP_LIST_ID, base_url=settings.CLICKUP_API_URL
    )
