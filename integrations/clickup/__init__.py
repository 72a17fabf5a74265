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

from dataclasses import dataclass
from enum import IntEnum

from django.conf import settings

from integrations.http import HttpClient
from jobs.errors import PermanentError, TransientError


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

    def __init__(self, api_token: str, *, list_id: str, base_url: str = "https://api.clickup.com", session=None):
        super().__init__(base_url, session=session)
        self.session.headers["Authorization"] = api_token
        self.list_id = list_id

    def create_task(
        self, *, name: str, markdown_content: str, priority: Priority | None = None, tags: tuple[str, ...] = ()
    ) -> ClickUpTask:
        """Create a task in the configured list. ClickUp has no idempotency key: record the task id once created."""
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


def client_from_settings() -> ClickUpClient | None:
    """None unless CLICKUP_API_TOKEN and CLICKUP_LIST_ID are set: the job handler records the job as skipped."""
    if not (settings.CLICKUP_API_TOKEN and settings.CLICKUP_LIST_ID):
        return None
    return ClickUpClient(
        settings.CLICKUP_API_TOKEN, list_id=settings.CLICKUP_LIST_ID, base_url=settings.CLICKUP_API_URL
    )
