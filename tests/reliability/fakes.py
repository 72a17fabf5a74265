"""Stateful fakes of Pipedrive, ClickUp, Mailgun and the LLM gateway that count what was created.

Each answers in the service's documented shapes (Pipedrive API v1 persons,
organizations, leads, notes, users/me; ClickUp v2 Create Task and Get Tasks;
Mailgun's messages and events; an OpenAI-compatible chat completion), keeps
every record it created, and reports duplicates by the identity a real
record has for us: a person by email, an organization by name, a lead by
origin_id, a note by its reference, a task by the lead's admin link, an
email by its Message-ID. Each fake runs in its own threaded werkzeug server;
a FaultProxy goes in front of it.
"""

import itertools
import json
import re
import threading
import time
import uuid
from collections import Counter

from werkzeug import Request, Response
from werkzeug.serving import make_server

from tests.prototypes.fake_v0 import Behaviour, FakeV0


class FakeServer:
    def __init__(self):
        self._lock = threading.Lock()
        self._server = make_server("127.0.0.1", 0, self._wsgi, threaded=True)
        self.port = self._server.server_port
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self.calls: Counter = Counter()

    @property
    def address(self):
        return ("127.0.0.1", self.port)

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self._server.shutdown()

    def _wsgi(self, environ, start_response):
        request = Request(environ)
        with self._lock:
            self.calls[f"{request.method} {request.path}"] += 1
            body, status = self.answer(request)
        return Response(json.dumps(body), status=status, content_type="application/json")(environ, start_response)

    def answer(self, request):  # pragma: no cover - each fake answers its own routes
        raise NotImplementedError


def duplicates(identities) -> int:
    """How many records beyond the first share an identity."""
    return sum(count - 1 for count in Counter(identities).values() if count > 1)


class FakePipedrive(FakeServer):
    def __init__(self):
        super().__init__()
        self.persons, self.organizations, self.leads, self.notes = [], [], [], []
        self._ids = itertools.count(1)

    def answer(self, request):
        path, args = request.path, request.args
        ok = lambda data: ({"success": True, "data": data}, 200)  # noqa: E731
        if path == "/v1/users/me":
            return ok({"id": 1, "company_domain": "acme"})
        if path == "/v1/persons/search":
            term = args["term"].casefold()
            found = [p for p in self.persons if term in [e["value"].casefold() for e in p["email"]]]
            items = [
                {"result_score": 1, "item": {"id": p["id"], "emails": [e["value"] for e in p["email"]]}} for p in found
            ]
            return ok({"items": items})
        if path == "/v1/organizations/search":
            found = [o for o in self.organizations if o["name"].casefold() == args["term"].casefold()]
            return ok({"items": [{"result_score": 1, "item": {"id": o["id"], "name": o["name"]}} for o in found]})
        if path == "/v1/persons" and request.method == "POST":
            person = {"id": next(self._ids), **request.json}
            self.persons.append(person)
            return ok(person)
        if path == "/v1/organizations" and request.method == "POST":
            org = {"id": next(self._ids), **request.json}
            self.organizations.append(org)
            return ok(org)
        if path == "/v1/leads" and request.method == "POST":
            lead_id = str(uuid.uuid4())
            lead = {"id": lead_id, "cc_email": f"acme+{lead_id[:8]}@pipedrivemail.com", **request.json}
            self.leads.append(lead)
            return ok(lead)
        if path == "/v1/leads":
            if "person_id" in args:
                found = [lead for lead in self.leads if lead.get("person_id") == int(args["person_id"])]
            else:
                found = [lead for lead in self.leads if lead.get("organization_id") == int(args["organization_id"])]
            return ok(found or None)
        if path == "/v1/notes" and request.method == "POST":
            note = {"id": next(self._ids), **request.json}
            self.notes.append(note)
            return ok(note)
        if path == "/v1/notes":
            return ok([note for note in self.notes if note.get("lead_id") == args["lead_id"]] or None)
        return {"success": False, "error": "not found"}, 404

    def duplicates(self) -> int:
        return (
            duplicates(p["email"][0]["value"] for p in self.persons)
            + duplicates(o["name"] for o in self.organizations)
            + duplicates(lead["origin_id"] for lead in self.leads)
            + duplicates(note_identity(n) for n in self.notes)
        )


def note_identity(note: dict) -> str:
    """A note's reference line (the record it is about), else its whole content."""
    found = re.search(r"Reference: ([^<\s]+)", note["content"])
    return found.group(1) if found else note["content"]


class FakeClickUp(FakeServer):
    def __init__(self):
        super().__init__()
        self.tasks = []

    def answer(self, request):
        if not re.fullmatch(r"/api/v2/list/\w+/task", request.path):
            return {"err": "Route not found", "ECODE": "APP_001"}, 404
        if request.method == "POST":
            body = request.json
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
            return task, 200
        tag, after = request.args.get("tags[]"), int(request.args.get("date_created_gt", 0))
        before = int(request.args.get("date_created_lt", 2**62))
        page, size = int(request.args.get("page", 0)), 100
        found = [
            t for t in self.tasks
            if after < int(t["date_created"]) < before and (tag is None or tag in [x["name"] for x in t["tags"]])
        ]  # fmt: skip
        return {"tasks": found[page * size : (page + 1) * size], "last_page": (page + 1) * size >= len(found)}, 200

    def duplicates(self) -> int:
        return duplicates(task_identity(t) for t in self.tasks)


def task_identity(task: dict) -> tuple[str, str]:
    """What an alert is about: its heading ("New lead", "Prototype ready"…) and the back-office page it links."""
    link = re.search(r"/admin/(leadgen/lead|prototypes/prototype)/\d+/", task["markdown_description"]).group()
    return task["name"].split(":", 1)[0], link


class FakeMailgun(FakeServer):
    def __init__(self):
        super().__init__()
        self.messages = []

    def answer(self, request):
        if request.method == "POST" and request.path.endswith("/messages"):
            ours = request.form.get("h:Message-Id")
            message_id = ours or f"<{uuid.uuid4().hex}@fake>"
            self.messages.append(
                {
                    "message_id": message_id,
                    "ours": bool(ours),
                    "to": request.form.getlist("to"),
                    "subject": request.form["subject"],
                }
            )
            return {"id": message_id, "message": "Queued. Thank you."}, 200
        if request.path.endswith("/events"):
            wanted = request.args.get("message-id", "")
            items = [
                {"event": "accepted", "message": {"headers": {"message-id": m["message_id"].strip("<>")}}}
                for m in self.messages
                if m["message_id"].strip("<>") == wanted
            ]
            return {"items": items, "paging": {}}, 200
        return {"message": "not found"}, 404

    def duplicates(self) -> int:
        """By our Message-ID; a message sent without one by its recipients and subject."""
        return duplicates(m["message_id"] if m["ours"] else (*m["to"], m["subject"]) for m in self.messages)


class FakeLlm(FakeServer):
    """An OpenAI-compatible gateway that finds every submission a real lead."""

    def answer(self, request):
        content = json.dumps({"category": "lead", "confidence": 0.9, "reasoning": "A real need."})
        return {
            "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}],
        }, 200


class TimedFakeV0(FakeV0):
    """The V0 fake of the prototype tests, where a generation takes `generation_seconds` and then reaches its
    outcome on V0's side, as a real one does whether anyone reads its stream or not; `chats_per_lead()`
    counts the chats by our metadata."""

    def __init__(self, *, generation_seconds: float, outcomes: list[str]):
        super().__init__(Behaviour(outcomes=outcomes))
        self.generation_seconds = generation_seconds

    def _message(self, chat, role, content):
        message = super()._message(chat, role, content)
        if role == "assistant":
            self._loop.call_later(self.generation_seconds, self._finish, chat, message)
        return message

    def chats_per_lead(self) -> Counter:
        return Counter(chat.metadata.get("leadKey") for chat in list(self.chats.values()))

    @property
    def address(self):
        host, port = self.url.split("//", 1)[1].split("/", 1)[0].split(":")
        return (host, int(port))
