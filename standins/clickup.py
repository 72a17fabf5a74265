"""A local ClickUp API v2 list that answers as ClickUp does (developer.clickup.com: Create Task, Get Tasks) and
keeps every task: the sales alerts.

`POST /api/v2/list/{id}/task` answers the task (`id`, `name`, `markdown_description`, `description`, `tags`,
`date_created` in Unix ms, `url`); `GET` on the same path answers `{"tasks", "last_page"}`, 100 a page,
filtered by `tags[]` and `date_created_gt`/`_lt`. The personal token goes in `Authorization` as it is;
another token answers 401 (OAUTH_018), another list 401 (OAUTH_023), as ClickUp does.

`duplicates()` counts alerts about the same thing: a task's heading and the back-office page it links.

    python -m standins.clickup --port 8768
"""

import argparse
import re
import time
import uuid
from collections.abc import Sequence

from aiohttp import web

from standins.base import Received
from standins.serving import AiohttpStandIn, duplicates

API_TOKEN = "pk_standin_clickup"
LIST_ID = "901"


class ClickUp(AiohttpStandIn):
    name = "clickup"

    def __init__(self, *, api_token: str = API_TOKEN, list_id: str = LIST_ID, host: str = "127.0.0.1", port: int = 0):
        super().__init__(host=host, port=port)
        self.api_token, self.list_id = api_token, list_id
        self.tasks = []

    def settings(self) -> dict[str, str]:
        return {"CLICKUP_API_URL": self.origin, "CLICKUP_API_TOKEN": self.api_token, "CLICKUP_LIST_ID": self.list_id}

    def routes(self, app: web.Application) -> None:
        app.router.add_route("*", "/{path:.*}", self.handle)

    async def handle(self, request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != self.api_token:
            return web.json_response({"err": "Oauth token not found", "ECODE": "OAUTH_018"}, status=401)
        matched = re.fullmatch(r"/api/v2/list/(\w+)/task", request.path)
        if not matched:
            return web.json_response({"err": "Route not found", "ECODE": "APP_001"}, status=404)
        if matched.group(1) != self.list_id:
            return web.json_response({"err": "Team(s) not authorized", "ECODE": "OAUTH_023"}, status=401)
        if request.method == "POST":
            return web.json_response(self.create(await request.json()))
        return web.json_response(self.find(request.query))

    def create(self, body: dict) -> dict:
        task_id = uuid.uuid4().hex[:9]
        task = {
            "id": task_id,
            "name": body["name"],
            "markdown_description": body["markdown_content"],
            "description": body["markdown_content"],
            "tags": [{"name": tag} for tag in body.get("tags", [])],
            "date_created": str(int(time.time() * 1000)),
            "url": f"https://app.clickup.com/t/{task_id}",
        }
        self.tasks.append(task)
        self.record(
            Received(self.name, "task", task["name"], body=task["markdown_description"],
                     detail={"id": task_id, "url": task["url"], "tags": body.get("tags", []),
                             "priority": body.get("priority")})
        )  # fmt: skip
        return task

    def find(self, args) -> dict:
        tag, after = args.get("tags[]"), int(args.get("date_created_gt", 0))
        before = int(args.get("date_created_lt", 2**62))
        page, size = int(args.get("page", 0)), 100
        found = [
            t for t in self.tasks
            if after < int(t["date_created"]) < before and (tag is None or tag in [x["name"] for x in t["tags"]])
        ]  # fmt: skip
        return {"tasks": found[page * size : (page + 1) * size], "last_page": (page + 1) * size >= len(found)}

    def duplicates(self) -> int:
        return duplicates(task_identity(t) for t in self.tasks)


def task_identity(task: dict) -> tuple[str, str]:
    """What an alert is about: its heading ("New lead", "Prototype ready"…) and the back-office page it links."""
    link = re.search(r"/admin/(leadgen/lead|prototypes/prototype)/\d+/", task["markdown_description"]).group()
    return task["name"].split(":", 1)[0], link


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="A local ClickUp list that keeps the tasks it is sent.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8768)
    parser.add_argument("--api-token", default=API_TOKEN, help="the personal token it accepts")
    parser.add_argument("--list-id", default=LIST_ID)
    args = parser.parse_args(argv)
    ClickUp(api_token=args.api_token, list_id=args.list_id, host=args.host, port=args.port).serve_until_signalled()


if __name__ == "__main__":
    main()
