"""Pipedrive API v1: persons, organizations, leads, notes and the Smart BCC address.

Reference: https://developers.pipedrive.com/docs/api/v1 (Persons, Organizations,
Leads, Notes, Users). Every v1 answer is `{"success": true, "data": ...}`;
searches answer `{"data": {"items": [{"result_score": ..., "item": {...}}]}}`.

The API token travels in the `x-api-token` header, the way Pipedrive's
authentication guide asks for it, rather than as the legacy `api_token` query
parameter: a URL ends up in proxy logs and exception messages, a header does not.

Searches are eventually consistent (a person created seconds ago may not be
found yet), so `find_or_create_*` avoids duplicates across retries seconds to
minutes apart, not between two concurrent calls; callers serialize per lead
through the job key. Leads and notes are looked up through their list
endpoints (filtered by person or lead), which read the records themselves:
a retry after a create whose answer was lost finds what it created.
"""

from dataclasses import dataclass

from django.conf import settings

from integrations.http import HttpClient
from jobs import PermanentError, TransientError

# Smart BCC: the company-wide address is `<company_domain>@pipedrivemail.com`
# (Pipedrive help, "Smart Bcc": the address is based on the company domain).
SMART_BCC_DOMAIN = "pipedrivemail.com"


@dataclass(frozen=True)
class PipedriveLead:
    id: str  # a UUID
    # The lead's own Smart BCC address: mail copied there is linked to this lead.
    cc_email: str | None


class PipedriveClient(HttpClient):
    service = "pipedrive"

    def __init__(self, api_token: str, *, base_url: str = "https://api.pipedrive.com"):
        super().__init__(base_url)
        self.headers["x-api-token"] = api_token
        self.headers["Accept"] = "application/json"

    # --- persons -----------------------------------------------------------------------------

    def find_person_id_by_email(self, email: str) -> int | None:
        items = self._search("v1/persons/search", term=email, fields="email")
        wanted = email.casefold()
        for item in items:
            if any(str(found).casefold() == wanted for found in item.get("emails") or ()):
                return _id(item)
        return None

    def create_person(self, *, name: str, email: str, phone: str | None = None, org_id: int | None = None) -> int:
        body: dict = {"name": name, "email": [{"value": email, "primary": True, "label": "work"}]}
        if phone:
            body["phone"] = [{"value": phone, "primary": True, "label": "work"}]
        if org_id is not None:
            body["org_id"] = org_id
        return _id(self._data(self.post("v1/persons", json=body)))

    def find_or_create_person(
        self, *, name: str, email: str, phone: str | None = None, org_id: int | None = None
    ) -> int:
        """The id of the person with this email, created when there is none. An existing person is left as is."""
        found = self.find_person_id_by_email(email)
        if found is not None:
            return found
        return self.create_person(name=name, email=email, phone=phone, org_id=org_id)

    # --- organizations -----------------------------------------------------------------------

    def find_organization_id_by_name(self, name: str) -> int | None:
        items = self._search("v1/organizations/search", term=name, fields="name")
        wanted = name.casefold()
        for item in items:
            if str(item.get("name") or "").casefold() == wanted:
                return _id(item)
        return None

    def create_organization(self, *, name: str) -> int:
        return _id(self._data(self.post("v1/organizations", json={"name": name})))

    def find_or_create_organization(self, *, name: str) -> int:
        """The id of the organization with this name (case-insensitive), created when there is none."""
        found = self.find_organization_id_by_name(name)
        if found is not None:
            return found
        return self.create_organization(name=name)

    # --- leads and notes ---------------------------------------------------------------------

    def create_lead(
        self,
        *,
        title: str,
        origin_id: str | None = None,
        person_id: int | None = None,
        organization_id: int | None = None,
    ) -> PipedriveLead:
        """A lead must be linked to a person, an organization or both (Pipedrive rejects it otherwise).

        `origin_id` names our record, so `find_lead` can tell whether an earlier call created it.
        """
        if person_id is None and organization_id is None:
            raise PermanentError("pipedrive: a lead needs a person or an organization")
        body: dict = {"title": title}
        if origin_id is not None:
            body["origin_id"] = origin_id
        if person_id is not None:
            body["person_id"] = person_id
        if organization_id is not None:
            body["organization_id"] = organization_id
        data = self._data(self.post("v1/leads", json=body))
        lead_id = data.get("id")
        if not isinstance(lead_id, str) or not lead_id:
            raise PermanentError("pipedrive: lead created without an id")
        return PipedriveLead(id=lead_id, cc_email=data.get("cc_email") or None)

    def find_lead(
        self, *, origin_id: str, person_id: int | None = None, organization_id: int | None = None
    ) -> PipedriveLead | None:
        """The lead with this `origin_id` among the person's (else the organization's) leads, or None.

        GET /v1/leads filtered by person or organization reads the leads
        themselves, not the search index: a lead created a moment ago is found.
        """
        params: dict = {"limit": 500}
        if person_id is not None:
            params["person_id"] = person_id
        elif organization_id is not None:
            params["organization_id"] = organization_id
        else:
            return None
        for lead in self._list(self.get("v1/leads", params=params)):
            if lead.get("origin_id") == origin_id and isinstance(lead.get("id"), str):
                return PipedriveLead(id=lead["id"], cc_email=lead.get("cc_email") or None)
        return None

    def find_note_on_lead(self, *, lead_id: str, marker: str) -> int | None:
        """The id of a note on this lead whose content contains `marker`, or None."""
        params = {"lead_id": lead_id, "limit": 500}
        for note in self._list(self.get("v1/notes", params=params)):
            if marker in str(note.get("content") or ""):
                return _id(note)
        return None

    def add_note_to_lead(self, *, lead_id: str, content: str) -> int:
        """Content is HTML (Pipedrive sanitizes it); escape anything that came from a visitor."""
        return _id(self._data(self.post("v1/notes", json={"content": content, "lead_id": lead_id})))

    # --- Smart BCC ---------------------------------------------------------------------------

    def smart_bcc_address(self) -> str:
        """The company-wide Smart BCC address, from the API user's company domain (GET /v1/users/me).

        Prefer a lead's own `cc_email` when there is one: mail sent there is
        linked to that lead, not only matched to contacts by address.
        """
        company_domain = self._data(self.get("v1/users/me")).get("company_domain")
        if not isinstance(company_domain, str) or not company_domain:
            raise PermanentError("pipedrive: the API user has no company domain")
        return f"{company_domain}@{SMART_BCC_DOMAIN}"

    # --- plumbing ----------------------------------------------------------------------------

    def _search(self, path: str, *, term: str, fields: str) -> list[dict]:
        params = {"term": term, "fields": fields, "exact_match": "true", "limit": 10}
        data = self._data(self.get(path, params=params))
        entries = data.get("items") or ()
        return [entry["item"] for entry in entries if isinstance(entry, dict) and isinstance(entry.get("item"), dict)]

    def _list(self, response) -> list[dict]:
        """The items of a list endpoint (`data` is an array, or null when there are none)."""
        payload = self._json(response)
        if not isinstance(payload, dict) or payload.get("success") is not True:
            raise PermanentError("pipedrive: unexpected answer")
        items = payload.get("data") or []
        if not isinstance(items, list):
            raise PermanentError("pipedrive: unexpected answer")
        return [item for item in items if isinstance(item, dict)]

    def _json(self, response):
        try:
            return response.json()
        except ValueError as exc:
            # A 2xx that is not JSON comes from something in between (a proxy, a maintenance page).
            raise TransientError("pipedrive: answer was not JSON") from exc

    def _data(self, response) -> dict:
        payload = self._json(response)
        if (
            not isinstance(payload, dict)
            or payload.get("success") is not True
            or not isinstance(payload.get("data"), dict)
        ):
            raise PermanentError("pipedrive: unexpected answer")
        return payload["data"]


def client_from_settings() -> PipedriveClient | None:
    """None when PIPEDRIVE_API_TOKEN is empty: the job handler records the job as skipped."""
    if not settings.PIPEDRIVE_API_TOKEN:
        return None
    return PipedriveClient(settings.PIPEDRIVE_API_TOKEN, base_url=settings.PIPEDRIVE_API_URL)


def _id(item: dict) -> int:
    item_id = item.get("id")
    if isinstance(item_id, bool) or not isinstance(item_id, int):
        raise PermanentError("pipedrive: answer without an id")
    return item_id
