"""A local Pipedrive API v1 that answers as Pipedrive does (developers.pipedrive.com/docs/api/v1: Persons,
Organizations, Leads, Notes, Users) and keeps every record it created.

Every answer is `{"success": true, "data": ...}`; searches answer `{"data": {"items": [{"result_score",
"item"}]}}`; list endpoints answer `data: null` when there is nothing. The API token is taken from the
`x-api-token` header or the legacy `api_token` parameter; another one answers 401 as Pipedrive does.

`duplicates()` counts records that share the identity a real record has for us: a person by email, an
organization by name, a lead by origin_id, a note by its reference line.

    python -m standins.pipedrive --port 8767
"""

import argparse
import html
import itertools
import re
import uuid
from collections.abc import Sequence

from aiohttp import web

from standins.base import Received
from standins.serving import AiohttpStandIn, duplicates

API_TOKEN = "standin-pipedrive-token"
_UNAUTHORIZED = {
    "success": False,
    "error": "unauthorized access",
    "errorCode": 401,
    "error_info": "Please check developers.pipedrive.com for more information about Pipedrive API.",
}


class Pipedrive(AiohttpStandIn):
    name = "pipedrive"

    def __init__(
        self, *, api_token: str = API_TOKEN, company_domain: str = "acme", host: str = "127.0.0.1", port: int = 0
    ):
        super().__init__(host=host, port=port)
        self.api_token = api_token
        self.company_domain = company_domain
        self.persons, self.organizations, self.leads, self.notes = [], [], [], []
        self._ids = itertools.count(1)

    def settings(self) -> dict[str, str]:
        return {"PIPEDRIVE_API_URL": self.origin, "PIPEDRIVE_API_TOKEN": self.api_token}

    def routes(self, app: web.Application) -> None:
        app.router.add_route("*", "/{path:.*}", self.handle)

    async def handle(self, request: web.Request) -> web.Response:
        if (request.headers.get("x-api-token") or request.query.get("api_token")) != self.api_token:
            return web.json_response(_UNAUTHORIZED, status=401)
        body = await request.json() if request.method == "POST" else {}
        data, status = self.answer(request.method, request.path, request.query, body)
        return web.json_response(data, status=status)

    def answer(self, method: str, path: str, args, body: dict) -> tuple[dict, int]:
        ok = lambda data: ({"success": True, "data": data}, 200)  # noqa: E731
        if path == "/v1/users/me":
            return ok({"id": 1, "company_domain": self.company_domain})
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
        if path == "/v1/persons" and method == "POST":
            person = {"id": next(self._ids), **body}
            self.persons.append(person)
            self.record(Received(self.name, "person", person.get("name", ""), detail=person))
            return ok(person)
        if path == "/v1/organizations" and method == "POST":
            org = {"id": next(self._ids), **body}
            self.organizations.append(org)
            self.record(Received(self.name, "organization", org.get("name", ""), detail=org))
            return ok(org)
        if path == "/v1/leads" and method == "POST":
            lead_id = str(uuid.uuid4())
            lead = {"id": lead_id, "cc_email": f"{self.company_domain}+{lead_id[:8]}@pipedrivemail.com", **body}
            self.leads.append(lead)
            self.record(Received(self.name, "lead", lead.get("title", ""), detail=lead))
            return ok(lead)
        if path == "/v1/leads":
            if "person_id" in args:
                found = [lead for lead in self.leads if lead.get("person_id") == int(args["person_id"])]
            else:
                found = [lead for lead in self.leads if lead.get("organization_id") == int(args["organization_id"])]
            return ok(found or None)
        if path == "/v1/notes" and method == "POST":
            note = {"id": next(self._ids), **body}
            self.notes.append(note)
            content = str(note.get("content") or "")
            on = next((lead.get("title") for lead in self.leads if lead["id"] == note.get("lead_id")), None)
            self.record(
                Received(self.name, "note", f"Note on {on or 'lead ' + str(note.get('lead_id'))}",
                         body=_plain(content), html=content, detail={"id": note["id"], "lead_id": note.get("lead_id")})
            )  # fmt: skip
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


def _plain(content: str) -> str:
    """A note's HTML as the text Pipedrive shows."""
    return html.unescape(re.sub(r"<[^>]+>", "", re.sub(r"<br\s*/?>|</p>|</li>", "\n", content))).strip()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="A local Pipedrive API v1 that keeps what it is sent.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8767)
    parser.add_argument("--api-token", default=API_TOKEN, help="the token it accepts")
    args = parser.parse_args(argv)
    Pipedrive(api_token=args.api_token, host=args.host, port=args.port).serve_until_signalled()


if __name__ == "__main__":
    main()
