"""Pipedrive API v1 contract, against a local server answering with the documented shapes.

Shapes: https://developers.pipedrive.com/docs/api/v1 (Persons, Organizations,
Leads, Notes, Users), including their example responses.
"""

import logging

import pytest

from integrations.pipedrive.client import PipedriveClient, PipedriveLead, client_from_settings
from jobs.errors import PermanentError, TransientError

TOKEN = "pd-s3cr3t-token"
AUTH = {"x-api-token": TOKEN}
LEAD_ID = "adf21080-0e10-11eb-879b-05d71fb426ec"


def ok(data, **extra):
    return {"success": True, "data": data, **extra}


def search_result(*items):
    return ok(
        {"items": [{"result_score": 0.5092, "item": item} for item in items]},
        additional_data={"pagination": {"start": 0, "limit": 10, "more_items_in_collection": False}},
    )


def person_item(person_id=1101, email="ada@example.com"):
    return {
        "id": person_id,
        "type": "person",
        "name": "Ada Lovelace",
        "phones": ["+44 20 7946 0958"],
        "emails": [email],
        "visible_to": 3,
        "owner": {"id": 8877},
        "organization": {"id": 5, "name": "Analytical Engines Ltd", "address": None},
        "custom_fields": [],
        "notes": [],
    }


def organization_item(org_id=5, name="Analytical Engines Ltd"):
    return {
        "id": org_id,
        "type": "organization",
        "name": name,
        "address": None,
        "visible_to": 3,
        "owner": {"id": 8877},
        "custom_fields": [],
        "notes": [],
    }


PERSON_SEARCH = {"term": "ada@example.com", "fields": "email", "exact_match": "true", "limit": "10"}
ORG_SEARCH = {"term": "Analytical Engines Ltd", "fields": "name", "exact_match": "true", "limit": "10"}


@pytest.fixture
def pipedrive(httpserver):
    return PipedriveClient(TOKEN, base_url=httpserver.url_for("/"))


# --- persons -------------------------------------------------------------------------------


def test_finds_a_person_by_exact_email_with_the_token_in_a_header(pipedrive, httpserver):
    httpserver.expect_request(
        "/v1/persons/search", method="GET", query_string=PERSON_SEARCH, headers=AUTH
    ).respond_with_json(search_result(person_item()))
    assert pipedrive.find_person_id_by_email("ada@example.com") == 1101


def test_no_person_found(pipedrive, httpserver):
    httpserver.expect_request("/v1/persons/search").respond_with_json(search_result())
    assert pipedrive.find_person_id_by_email("ada@example.com") is None


def test_a_search_hit_with_another_email_is_not_taken_for_the_person(pipedrive, httpserver):
    httpserver.expect_request("/v1/persons/search").respond_with_json(
        search_result(person_item(email="ada.lovelace@example.com"))
    )
    assert pipedrive.find_person_id_by_email("ada@example.com") is None


def test_emails_match_case_insensitively(pipedrive, httpserver):
    httpserver.expect_request("/v1/persons/search").respond_with_json(
        search_result(person_item(email="Ada@Example.com"))
    )
    assert pipedrive.find_person_id_by_email("ada@example.com") == 1101


def test_creates_a_person_with_primary_email_phone_and_organization(pipedrive, httpserver):
    httpserver.expect_request(
        "/v1/persons",
        method="POST",
        headers=AUTH,
        json={
            "name": "Ada Lovelace",
            "email": [{"value": "ada@example.com", "primary": True, "label": "work"}],
            "phone": [{"value": "+442079460958", "primary": True, "label": "work"}],
            "org_id": 5,
        },
    ).respond_with_json(
        ok(
            {
                "id": 1101,
                "company_id": 12,
                "name": "Ada Lovelace",
                "first_name": "Ada",
                "last_name": "Lovelace",
                "phone": [{"value": "+442079460958", "primary": True, "label": "work"}],
                "email": [{"value": "ada@example.com", "primary": True, "label": "work"}],
                "primary_email": "ada@example.com",
                "org_id": {"name": "Analytical Engines Ltd", "people_count": 1, "value": 5},
                "cc_email": "acme-sales@pipedrivemail.com",
                "add_time": "2026-11-30 23:50:12",
            },
            related_objects={"user": {"8877": {"id": 8877, "name": "Sales Bot"}}},
        ),
        status=201,
    )
    person_id = pipedrive.create_person(name="Ada Lovelace", email="ada@example.com", phone="+442079460958", org_id=5)
    assert person_id == 1101


def test_creates_a_person_without_phone_or_organization(pipedrive, httpserver):
    httpserver.expect_request(
        "/v1/persons",
        method="POST",
        json={"name": "Ada Lovelace", "email": [{"value": "ada@example.com", "primary": True, "label": "work"}]},
    ).respond_with_json(ok({"id": 1102, "name": "Ada Lovelace"}), status=201)
    assert pipedrive.create_person(name="Ada Lovelace", email="ada@example.com") == 1102


def test_find_or_create_person_reuses_an_existing_person(pipedrive, httpserver):
    httpserver.expect_request("/v1/persons/search").respond_with_json(search_result(person_item()))
    assert pipedrive.find_or_create_person(name="Ada Lovelace", email="ada@example.com") == 1101
    assert [request.path for request, _ in httpserver.log] == ["/v1/persons/search"]


def test_find_or_create_person_creates_a_missing_person(pipedrive, httpserver):
    httpserver.expect_request("/v1/persons/search").respond_with_json(search_result())
    httpserver.expect_request("/v1/persons", method="POST").respond_with_json(ok({"id": 1103}), status=201)
    assert pipedrive.find_or_create_person(name="Ada Lovelace", email="ada@example.com", org_id=5) == 1103
    assert [request.path for request, _ in httpserver.log] == ["/v1/persons/search", "/v1/persons"]


# --- organizations -------------------------------------------------------------------------


def test_finds_an_organization_by_exact_name(pipedrive, httpserver):
    httpserver.expect_request(
        "/v1/organizations/search", method="GET", query_string=ORG_SEARCH, headers=AUTH
    ).respond_with_json(search_result(organization_item(name="analytical engines ltd")))
    assert pipedrive.find_organization_id_by_name("Analytical Engines Ltd") == 5


def test_a_similar_organization_name_is_not_a_match(pipedrive, httpserver):
    httpserver.expect_request("/v1/organizations/search").respond_with_json(
        search_result(organization_item(name="Analytical Engines Ltd (UK)"))
    )
    assert pipedrive.find_organization_id_by_name("Analytical Engines Ltd") is None


def test_find_or_create_organization(pipedrive, httpserver):
    httpserver.expect_request("/v1/organizations/search").respond_with_json(search_result())
    httpserver.expect_request(
        "/v1/organizations", method="POST", headers=AUTH, json={"name": "Analytical Engines Ltd"}
    ).respond_with_json(
        ok({"id": 6, "name": "Analytical Engines Ltd", "cc_email": "acme-sales@pipedrivemail.com"}), status=201
    )
    assert pipedrive.find_or_create_organization(name="Analytical Engines Ltd") == 6

    httpserver.clear()
    httpserver.expect_request("/v1/organizations/search").respond_with_json(search_result(organization_item(org_id=6)))
    assert pipedrive.find_or_create_organization(name="Analytical Engines Ltd") == 6
    assert [request.path for request, _ in httpserver.log] == ["/v1/organizations/search"]


# --- leads, notes, Smart BCC ---------------------------------------------------------------


def test_creates_a_lead_and_returns_its_uuid_and_smart_bcc_address(pipedrive, httpserver):
    httpserver.expect_request(
        "/v1/leads",
        method="POST",
        headers=AUTH,
        json={"title": "Ada Lovelace – Diagnostic", "person_id": 1101, "organization_id": 5},
    ).respond_with_json(
        ok(
            {
                "id": LEAD_ID,
                "title": "Ada Lovelace – Diagnostic",
                "owner_id": 1,
                "creator_id": 1,
                "label_ids": [],
                "person_id": 1101,
                "organization_id": 5,
                "source_name": "API",
                "origin": "API",
                "origin_id": None,
                "channel": None,
                "channel_id": None,
                "is_archived": False,
                "was_seen": False,
                "value": None,
                "expected_close_date": None,
                "next_activity_id": None,
                "add_time": "2026-11-30T23:50:12.551Z",
                "update_time": "2026-11-30T23:50:12.551Z",
                "visible_to": "3",
                "cc_email": "acme-sales+1+leadntPaYKA5QRxXkh6WMNHiGh@pipedrivemail.com",
            }
        ),
        status=201,
    )
    lead = pipedrive.create_lead(title="Ada Lovelace – Diagnostic", person_id=1101, organization_id=5)
    assert lead == PipedriveLead(id=LEAD_ID, cc_email="acme-sales+1+leadntPaYKA5QRxXkh6WMNHiGh@pipedrivemail.com")


def test_a_lead_for_a_person_alone(pipedrive, httpserver):
    httpserver.expect_request("/v1/leads", method="POST", json={"title": "Ada", "person_id": 1101}).respond_with_json(
        ok({"id": LEAD_ID, "title": "Ada", "person_id": 1101, "organization_id": None}), status=201
    )
    assert pipedrive.create_lead(title="Ada", person_id=1101) == PipedriveLead(id=LEAD_ID, cc_email=None)


def test_a_lead_without_person_or_organization_is_refused_before_calling(pipedrive, httpserver):
    with pytest.raises(PermanentError):
        pipedrive.create_lead(title="Nobody")
    assert not httpserver.log


def test_adds_a_note_to_a_lead(pipedrive, httpserver):
    content = "<p><b>Diagnostic</b> requested from /pricing</p>"
    httpserver.expect_request(
        "/v1/notes", method="POST", headers=AUTH, json={"content": content, "lead_id": LEAD_ID}
    ).respond_with_json(
        ok(
            {
                "id": 77,
                "user_id": 8877,
                "deal_id": None,
                "person_id": None,
                "org_id": None,
                "lead_id": LEAD_ID,
                "content": content,
                "add_time": "2026-11-30 23:50:13",
                "update_time": "2026-11-30 23:50:13",
                "active_flag": True,
                "pinned_to_lead_flag": False,
            }
        )
    )
    assert pipedrive.add_note_to_lead(lead_id=LEAD_ID, content=content) == 77


def test_smart_bcc_address_comes_from_the_company_domain(pipedrive, httpserver):
    httpserver.expect_request("/v1/users/me", method="GET", headers=AUTH).respond_with_json(
        ok(
            {
                "id": 8877,
                "name": "Sales Bot",
                "email": "sales-bot@acme.example",
                "company_id": 12,
                "company_name": "Acme",
                "company_domain": "acme-sales",
                "company_country": "EE",
                "is_admin": 1,
                "active_flag": True,
                "timezone_name": "Europe/Tallinn",
                "default_currency": "EUR",
                "locale": "en_US",
                "language": {"language_code": "en", "country_code": "US"},
            }
        )
    )
    assert pipedrive.smart_bcc_address() == "acme-sales@pipedrivemail.com"


def test_smart_bcc_without_a_company_domain_is_permanent(pipedrive, httpserver):
    httpserver.expect_request("/v1/users/me").respond_with_json(ok({"id": 8877, "company_domain": None}))
    with pytest.raises(PermanentError):
        pipedrive.smart_bcc_address()


# --- failures ------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [500, 502, 503])
def test_server_errors_are_transient(pipedrive, httpserver, status):
    httpserver.expect_request("/v1/leads").respond_with_json(
        {"success": False, "error": "Internal error"}, status=status
    )
    with pytest.raises(TransientError):
        pipedrive.create_lead(title="Ada", person_id=1101)


def test_rate_limit_is_transient_with_retry_after(pipedrive, httpserver):
    httpserver.expect_request("/v1/persons/search").respond_with_json(
        {"success": False, "error": "Request over limit", "errorCode": 429},
        status=429,
        headers={"Retry-After": "2", "x-ratelimit-limit": "80", "x-ratelimit-remaining": "0", "x-ratelimit-reset": "2"},
    )
    with pytest.raises(TransientError) as raised:
        pipedrive.find_person_id_by_email("ada@example.com")
    assert raised.value.retry_after == 2


@pytest.mark.parametrize("status", [400, 401, 403, 404, 410])
def test_client_errors_are_permanent(pipedrive, httpserver, status):
    httpserver.expect_request("/v1/leads").respond_with_json(
        {
            "success": False,
            "error": "Person ID or Organization ID is required.",
            "error_info": "Please check developers.pipedrive.com for more information about Pipedrive API.",
            "data": None,
            "additional_data": None,
        },
        status=status,
    )
    with pytest.raises(PermanentError):
        pipedrive.create_lead(title="Ada", person_id=1101)


def test_an_unsuccessful_answer_is_permanent(pipedrive, httpserver):
    httpserver.expect_request("/v1/notes").respond_with_json(
        {"success": False, "error": "Lead not found", "data": None}
    )
    with pytest.raises(PermanentError):
        pipedrive.add_note_to_lead(lead_id=LEAD_ID, content="<p>hi</p>")


def test_an_answer_that_is_not_json_is_transient(pipedrive, httpserver):
    httpserver.expect_request("/v1/users/me").respond_with_data("<html>maintenance</html>", content_type="text/html")
    with pytest.raises(TransientError):
        pipedrive.smart_bcc_address()


def test_the_token_and_the_email_never_reach_urls_logs_or_errors(pipedrive, httpserver, caplog):
    httpserver.expect_request("/v1/persons/search").respond_with_json(search_result())
    httpserver.expect_request("/v1/persons").respond_with_json(
        {"success": False, "error": "ada@example.com"}, status=400
    )
    with caplog.at_level(logging.DEBUG), pytest.raises(PermanentError) as raised:
        pipedrive.find_or_create_person(name="Ada Lovelace", email="ada@example.com")
    assert all(TOKEN not in request.url for request, _ in httpserver.log)
    logged = "\n".join(r.getMessage() for r in caplog.records if not r.name.startswith("werkzeug"))
    assert "/v1/persons/search" in logged
    for leaked in (TOKEN, "ada@example.com", "Ada Lovelace"):
        assert leaked not in logged
        assert leaked not in str(raised.value)


# --- configuration -------------------------------------------------------------------------


def test_not_configured_without_a_token(settings):
    settings.PIPEDRIVE_API_TOKEN = ""
    assert client_from_settings() is None


def test_configured_client_uses_the_settings(settings, httpserver):
    settings.PIPEDRIVE_API_TOKEN, settings.PIPEDRIVE_API_URL = "from-settings", httpserver.url_for("/")
    httpserver.expect_request("/v1/users/me", headers={"x-api-token": "from-settings"}).respond_with_json(
        ok({"id": 1, "company_domain": "acme-sales"})
    )
    assert client_from_settings().smart_bcc_address() == "acme-sales@pipedrivemail.com"
