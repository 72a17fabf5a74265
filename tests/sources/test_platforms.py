"""Each platform's signature check and payload reading, driven by requests the stand-ins build and sign
exactly as the platform does."""

import json
import time

import pytest

from sources import platforms
from sources.platforms import PayloadUnreadable, SignatureRefused
from standins import platforms as standin
from standins.graph_api import lead, lead_from_testing_tool

FB_SECRET = "0f1e2d3c4b5a69788796a5b4c3d2e1f0"
GOOGLE_KEY = "form-key-7c1d"
TYPEFORM_SECRET = "typeform-signing-secret"
WEBFLOW_SECRET = "3f6a9c0e2b4d6f8a1c3e5a7b9d1f3a5c"
GENERIC_SECRET = standin.standard_webhooks_secret()

SECRETS = {
    "facebook": FB_SECRET,
    "google_ads": GOOGLE_KEY,
    "typeform": TYPEFORM_SECRET,
    "webflow": WEBFLOW_SECRET,
    "generic": GENERIC_SECRET,
}
ADA = {
    "first_name": "Ada",
    "last_name": "Lovelace",
    "email": "ada@example.com",
    "phone": "+442079460958",
    "company": "Analytical Engines Ltd",
}


def signed(kind, **options):
    """The stand-in's request for `kind`, signed with that kind's secret above."""
    if kind == "facebook":
        return standin.facebook_leadgen(app_secret=FB_SECRET, **options)
    if kind == "google_ads":
        return standin.google_ads_lead(google_key=GOOGLE_KEY, **options)
    if kind == "typeform":
        return standin.typeform_response(secret=TYPEFORM_SECRET, **options)
    if kind == "webflow":
        return standin.webflow_form_submission(secret=WEBFLOW_SECRET, **options)
    return standin.generic_webhook(secret=GENERIC_SECRET, **options)


def verify(kind, request, *, secret=None, now=None):
    platforms.verify(
        kind,
        secrets={"secret": SECRETS[kind] if secret is None else secret},
        headers=request.headers,
        body=request.body,
        now=time.time() if now is None else now,
    )


def read(kind, request):
    return platforms.submissions(kind, body=request.body, headers=request.headers)


# --- each platform's own request verifies and reads into the lead's fields -------------------


def test_a_facebook_notification_verifies_and_names_the_leads_to_fetch():
    request = signed("facebook", leadgen_ids=["444444444444444", "444444444444445"], form_id="555000")
    verify("facebook", request)

    found = read("facebook", request)

    assert [submission.platform_id for submission in found] == ["444444444444444", "444444444444445"]
    assert all(submission.fetch and submission.answers == {} and not submission.is_test for submission in found)
    assert found[0].context["form_id"] == "555000"
    assert found[0].context["page_id"] == "109876543210987"


def test_a_fetched_facebook_lead_maps_to_the_lead_fields():
    notified = read("facebook", signed("facebook", leadgen_ids=["444444444444444"]))[0]
    graph_lead = lead("444444444444444")

    submission = platforms.facebook_lead_submission(graph_lead, context=notified.context)

    assert submission.platform_id == "444444444444444" and not submission.is_test
    assert submission.context["page_id"] == "109876543210987"
    assert submission.context["ad_id"] == graph_lead["ad_id"]
    assert platforms.mapped_fields("facebook", submission, {}) == ADA


def test_a_facebook_multiple_choice_answer_keeps_every_value():
    answers = platforms.facebook_answers(lead("1", {"services": ["Diagnostic", "Strategy"], "email": "a@b.example"}))

    assert answers == {"services": "Diagnostic, Strategy", "email": "a@b.example"}


def test_a_lead_from_the_lead_ads_testing_tool_is_a_test_lead():
    submission = platforms.facebook_lead_submission(lead_from_testing_tool("444444444444444"))

    assert submission.is_test
    assert not platforms.facebook_is_test(lead("444444444444444"))


def test_a_google_ads_lead_verifies_and_maps_its_columns():
    request = signed("google_ads", lead_id="lead-abc-123")
    verify("google_ads", request)

    (submission,) = read("google_ads", request)

    assert submission.platform_id == "lead-abc-123" and not submission.is_test
    assert submission.context["form_id"] == "123456789" and submission.context["campaign_id"] == "987654321"
    assert "google_key" not in submission.document
    assert platforms.mapped_fields("google_ads", submission, None) == ADA


def test_google_ads_is_test_marks_the_submission():
    (submission,) = read("google_ads", signed("google_ads", is_test=True))

    assert submission.is_test


def test_google_ads_work_email_is_the_email_when_there_is_no_personal_one():
    request = signed("google_ads", columns={"FULL_NAME": "Ada Lovelace", "WORK_EMAIL": "ada@engines.example"})

    (submission,) = read("google_ads", request)

    assert platforms.mapped_fields("google_ads", submission, None)["email"] == "ada@engines.example"


def test_a_typeform_response_verifies_and_reads_answers_by_ref():
    answers = [
        standin.typeform_answer("first_name", "text", "Ada"),
        standin.typeform_answer("email", "email", "ada@example.com"),
        standin.typeform_answer("phone", "phone_number", "+442079460958"),
        standin.typeform_answer("service_type", "choice", "process_automation"),
        standin.typeform_answer("team_size", "number", 12),
        standin.typeform_answer("topics", "choices", ["Invoicing", "Payroll"]),
    ]
    request = signed("typeform", answers=answers, token="a3a12ec67a1365927098a606107fac15", hidden={"utm": "spring"})
    verify("typeform", request)

    (submission,) = read("typeform", request)

    assert submission.platform_id == "a3a12ec67a1365927098a606107fac15"
    assert submission.answers["team_size"] == "12"
    assert submission.answers["topics"] == "Invoicing, Payroll"
    assert submission.answers["hidden.utm"] == "spring"
    assert platforms.mapped_fields("typeform", submission, {"message": "topics"}) == {
        "first_name": "Ada",
        "email": "ada@example.com",
        "phone": "+442079460958",
        "message": "Invoicing, Payroll",
        "service_type": "process_automation",
    }


def test_a_typeform_partial_response_is_no_lead():
    assert read("typeform", signed("typeform", event_type="form_response_partial")) == []


def test_a_webflow_submission_verifies_and_reads_its_fields_by_name():
    request = signed("webflow", submission_id="6321ca84df3949bfc6752327")
    verify("webflow", request)

    (submission,) = read("webflow", request)

    assert submission.platform_id == "6321ca84df3949bfc6752327"
    assert submission.context["formId"] == "65429eadebe8a9f3a30f62d0"
    assert platforms.mapped_fields("webflow", submission, {}) == {
        **ADA,
        "message": "We need help automating our invoicing.",
    }


def test_webflow_field_names_match_whatever_their_case_and_numbers_are_read_as_text():
    request = signed("webflow", data={"First Name": "Ada", "email": "ada@example.com", "Phone Number": 15550000000})

    (submission,) = read("webflow", request)

    assert platforms.mapped_fields("webflow", submission, None) == {
        "first_name": "Ada",
        "email": "ada@example.com",
        "phone": "15550000000",
    }


def test_a_generic_webhook_verifies_and_its_default_mapping_reads_the_flat_fields():
    request = signed("generic", webhook_id="msg_2b7f")
    verify("generic", request)

    (submission,) = read("generic", request)

    assert submission.platform_id == "msg_2b7f" and submission.answers == {}
    assert platforms.mapped_fields("generic", submission, None) == {
        **ADA,
        "message": "We need help automating our invoicing.",
    }


def test_a_generic_mapping_reads_paths_into_the_document_with_jmespath():
    payload = {
        "contact": {"name": "Grace Brewster Hopper", "emails": [{"kind": "work", "value": "grace@navy.example"}]},
        "answers": [{"q": "budget", "a": 5000}, {"q": "notes", "a": "Needs a COBOL audit"}],
        "tags": ["cobol", "audit"],
    }
    mapping = {
        "full_name": "contact.name",
        "email": "contact.emails[?kind=='work'] | [0].value",
        "message": "answers[?q=='notes'].a | [0]",
        "company": "tags",
    }
    (submission,) = read("generic", signed("generic", payload=payload))

    assert platforms.mapped_fields("generic", submission, mapping) == {
        "first_name": "Grace",
        "last_name": "Brewster Hopper",
        "email": "grace@navy.example",
        "company": "cobol, audit",
        "message": "Needs a COBOL audit",
    }


def test_a_full_name_fills_only_the_names_the_platform_left_empty():
    request = signed("google_ads", columns={"FULL_NAME": "Ada King Lovelace", "LAST_NAME": "Byron", "EMAIL": "a@x.io"})
    (submission,) = read("google_ads", request)

    fields = platforms.mapped_fields("google_ads", submission, None)

    assert (fields["first_name"], fields["last_name"]) == ("Ada", "Byron")


# --- refused ---------------------------------------------------------------------------------

OTHER_SECRETS = {**{kind: "another-secret" for kind in platforms.KINDS}, "generic": standin.standard_webhooks_secret()}


@pytest.mark.parametrize(
    ("kind", "original", "changed"),
    [
        ("facebook", b"444444444444444", b"444444444444446"),
        ("typeform", b"ada@example.com", b"eve@example.com"),
        ("webflow", b"ada@example.com", b"eve@example.com"),
        ("generic", b"ada@example.com", b"eve@example.com"),
    ],
)
def test_a_tampered_body_is_refused(kind, original, changed):
    request = signed(kind, leadgen_ids=["444444444444444"]) if kind == "facebook" else signed(kind)
    tampered = request.body.replace(original, changed)
    assert tampered != request.body

    with pytest.raises(SignatureRefused):
        verify(kind, standin.PlatformRequest(body=tampered, headers=request.headers))


@pytest.mark.parametrize("kind", platforms.KINDS)
def test_another_secret_is_refused(kind):
    with pytest.raises(SignatureRefused):
        verify(kind, signed(kind), secret=OTHER_SECRETS[kind])


EMPTY_KEY_REQUESTS = {
    "facebook": lambda: standin.facebook_leadgen(app_secret=""),
    "typeform": lambda: standin.typeform_response(secret=""),
    "webflow": lambda: standin.webflow_form_submission(secret=""),
    "google_ads": lambda: standin.google_ads_lead(google_key=""),
    "generic": lambda: signed("generic"),  # an empty key cannot sign Standard Webhooks
}


@pytest.mark.parametrize("kind", platforms.KINDS)
def test_a_source_without_a_secret_refuses_everything_even_a_request_signed_with_an_empty_key(kind):
    with pytest.raises(SignatureRefused, match="no secret"):
        verify(kind, EMPTY_KEY_REQUESTS[kind](), secret="")


@pytest.mark.parametrize(
    ("kind", "header"),
    [
        ("facebook", "X-Hub-Signature-256"),
        ("typeform", "Typeform-Signature"),
        ("webflow", "x-webflow-signature"),
        ("webflow", "x-webflow-timestamp"),
        ("generic", "webhook-signature"),
        ("generic", "webhook-id"),
        ("generic", "webhook-timestamp"),
    ],
)
def test_a_missing_signature_header_is_refused(kind, header):
    request = signed(kind)
    headers = {name: value for name, value in request.headers.items() if name != header}
    assert headers != request.headers

    with pytest.raises(SignatureRefused):
        verify(kind, standin.PlatformRequest(body=request.body, headers=headers))


def test_headers_are_matched_whatever_their_case():
    request = signed("facebook")
    shouted = {name.upper(): value for name, value in request.headers.items()}

    verify("facebook", standin.PlatformRequest(body=request.body, headers=shouted))


@pytest.mark.parametrize("seconds_off", [-301, 301])
def test_a_webflow_request_outside_five_minutes_is_refused_though_signed(seconds_off):
    now = time.time()
    request = signed("webflow", timestamp_ms=int((now + seconds_off) * 1000))

    with pytest.raises(SignatureRefused, match="five minutes"):
        verify("webflow", request, now=now)
    verify("webflow", request, now=now + seconds_off)


def test_a_stale_standard_webhooks_request_is_refused_though_signed():
    with pytest.raises(SignatureRefused, match="too old"):
        verify("generic", signed("generic", timestamp=int(time.time()) - 600))


@pytest.mark.parametrize(
    "body",
    [
        b'{"google_key": "form-key-7c1e", "lead_id": "1"}',  # another key
        b'{"lead_id": "1"}',  # none
        b'{"google_key": 12, "lead_id": "1"}',
        b"google_key=form-key-7c1d",  # not JSON
        b"[" * 100_000,
    ],
)
def test_google_ads_without_the_forms_key_in_its_body_is_refused(body):
    with pytest.raises(SignatureRefused):
        verify("google_ads", standin.PlatformRequest(body=body, headers={"Content-Type": "application/json"}))


def test_a_malformed_standard_webhooks_signature_is_refused_not_an_error():
    request = signed("generic")
    headers = {**request.headers, "webhook-signature": "v1"}

    with pytest.raises(SignatureRefused):
        verify("generic", standin.PlatformRequest(body=request.body, headers=headers))


def test_a_standard_webhooks_secret_that_is_not_whsec_base64_is_named_for_the_admin():
    assert platforms.secret_errors("generic", GENERIC_SECRET) == []
    assert platforms.secret_errors("generic", "whsec_!!!") != []
    assert platforms.secret_errors("typeform", "anything") == []


# --- Facebook's verification handshake ----------------------------------------------------


def test_the_facebook_handshake_echoes_the_challenge_only_for_our_verify_token():
    query = standin.facebook_verification(verify_token="meatyhamhock", challenge="1158201444")

    assert platforms.facebook_handshake(query, verify_token="meatyhamhock") == "1158201444"
    assert platforms.facebook_handshake(query, verify_token="another") is None
    assert platforms.facebook_handshake(query, verify_token="") is None
    assert platforms.facebook_handshake({**query, "hub.mode": "unsubscribe"}, verify_token="meatyhamhock") is None
    assert platforms.facebook_handshake({"hub.mode": "subscribe", "hub.challenge": "1"}, verify_token="x") is None


def test_the_facebook_handshake_echoes_nothing_that_is_not_a_plain_token():
    query = standin.facebook_verification(verify_token="meatyhamhock", challenge="<script>alert(1)</script> x")

    assert platforms.facebook_handshake(query, verify_token="meatyhamhock") is None


# --- requests with nothing for us ---------------------------------------------------------


def test_a_facebook_change_of_another_field_is_no_lead():
    request = signed("facebook")
    document = request.json()
    document["entry"][0]["changes"][0]["field"] = "feed"

    assert platforms.submissions("facebook", body=json.dumps(document).encode(), headers={}) == []


def test_a_webflow_event_other_than_a_form_submission_is_no_lead():
    assert platforms.submissions("webflow", body=b'{"triggerType": "site_publish", "payload": {}}', headers={}) == []


# --- unreadable: named per field, never a crash -------------------------------------------


def unreadable(kind, body, headers=None) -> dict:
    with pytest.raises(PayloadUnreadable) as raised:
        platforms.submissions(kind, body=body, headers=headers or {})
    assert raised.value.fields, "every refusal names where the problem is"
    return raised.value.fields


@pytest.mark.parametrize("kind", platforms.KINDS)
@pytest.mark.parametrize("body", [b"", b"not json", b"\xff\xfe", b"[" * 100_000, b'{"a": NaN}'])
def test_a_body_that_is_not_json_is_unreadable(kind, body):
    assert "body" in unreadable(kind, body, {"webhook-id": "msg_1"})


def test_text_postgresql_cannot_store_is_unreadable_where_it_is():
    fields = unreadable("generic", b'{"contact": {"name": "Ada\\u0000"}}', {"webhook-id": "msg_1"})

    assert fields == {"contact.name": ["Null characters are not allowed."]}


@pytest.mark.parametrize(
    ("kind", "document", "where"),
    [
        ("facebook", {"object": "user", "entry": []}, "object"),
        ("facebook", {"object": "page", "entry": {}}, "entry"),
        ("facebook", {"object": "page", "entry": [{"changes": [{"field": "leadgen", "value": {}}]}]},
         "entry[0].changes[0].value.leadgen_id"),
        ("facebook", {"object": "page", "entry": [{"changes": [{"field": "leadgen", "value": "1"}]}]},
         "entry[0].changes[0].value"),
        ("google_ads", {"user_column_data": []}, "lead_id"),
        ("google_ads", {"lead_id": "1", "user_column_data": [{"string_value": "x"}]}, "user_column_data[0].column_id"),
        ("google_ads", {"lead_id": "1", "user_column_data": [{"column_id": "EMAIL", "string_value": 3}]},
         "user_column_data[0].string_value"),
        ("google_ads", {"lead_id": "1", "user_column_data": [], "is_test": "yes"}, "is_test"),
        ("google_ads", {"lead_id": "x" * 256, "user_column_data": []}, "lead_id"),
        ("typeform", {"event_type": "form_response", "form_response": {"answers": []}}, "form_response.token"),
        ("typeform", {"event_type": "form_response"}, "form_response"),
        ("typeform", {"event_type": "form_response", "form_response": {"token": "t", "answers": [{"type": "text"}]}},
         "form_response.answers[0].field"),
        ("typeform", {"event_type": "ping"}, "event_type"),
        ("webflow", {"payload": {}}, "triggerType"),
        ("webflow", {"triggerType": "form_submission", "payload": {"data": {}}}, "payload.id"),
        ("webflow", {"triggerType": "form_submission", "payload": {"id": "1", "data": []}}, "payload.data"),
        ("webflow", {"triggerType": "form_submission", "payload": {}}, "payload.id"),
        ("generic", [{"email": "a@b.example"}], "body"),
    ],
)  # fmt: skip
def test_a_body_not_in_the_platforms_shape_is_unreadable_where_it_is(kind, document, where):
    assert where in unreadable(kind, json.dumps(document).encode(), {"webhook-id": "msg_1"})


def test_a_generic_request_without_its_webhook_id_is_unreadable():
    assert "webhook-id" in unreadable("generic", b'{"email": "a@b.example"}')


def test_a_mapping_that_finds_an_object_is_unreadable_per_field():
    (submission,) = read("generic", signed("generic", payload={"contact": {"email": "a@b.example"}}))

    with pytest.raises(PayloadUnreadable) as raised:
        platforms.mapped_fields("generic", submission, {"email": "contact", "first_name": "contact.first"})

    assert list(raised.value.fields) == ["email"]


def test_a_mapping_whose_expression_fails_on_the_document_is_unreadable_per_field():
    (submission,) = read("generic", signed("generic", payload={"tags": "not a list"}))

    with pytest.raises(PayloadUnreadable) as raised:
        platforms.mapped_fields("generic", submission, {"message": "join(', ', tags)"})

    assert list(raised.value.fields) == ["message"]


def test_a_graph_lead_without_field_data_is_unreadable():
    with pytest.raises(PayloadUnreadable) as raised:
        platforms.facebook_lead_submission({"id": "1", "field_data": [{"name": "email", "values": "a@b.example"}]})

    assert list(raised.value.fields) == ["field_data[0].values"]


# --- the mapping as the admin edits it ------------------------------------------------------


def test_mapping_errors_name_each_bad_entry():
    assert platforms.mapping_errors("generic", {"email": "contact.email", "phone": "phones[0]"}) == {}
    assert platforms.mapping_errors("facebook", {"email": ["email", "work_email"]}) == {}

    errors = platforms.mapping_errors(
        "generic", {"email": "contact.[", "nickname": "nick", "phone": "", "company": ["a"]}
    )
    assert set(errors) == {"email", "nickname", "phone", "company"}
    assert set(platforms.mapping_errors("typeform", {"email": 3, "phone": []})) == {"email", "phone"}
    assert list(platforms.mapping_errors("webflow", ["Email"])) == ["field_mapping"]


def test_an_invalid_mapping_is_unreadable_rather_than_guessed():
    (submission,) = read("generic", signed("generic"))

    with pytest.raises(PayloadUnreadable) as raised:
        platforms.mapped_fields("generic", submission, {"email": "contact.["})

    assert list(raised.value.fields) == ["email"]


def test_a_mapping_overrides_only_the_fields_it_names():
    (submission,) = read("generic", signed("generic", payload={**standin.PERSON, "note": "Call after 5pm"}))

    fields = platforms.mapped_fields("generic", submission, {"message": "note"})

    assert fields["message"] == "Call after 5pm" and fields["email"] == "ada@example.com"


# --- what the request log keeps ------------------------------------------------------------


def test_the_logged_google_body_has_no_key_and_reads_as_the_original():
    request = signed("google_ads", lead_id="lead-xyz")

    kept = platforms.loggable_body("google_ads", request.body)

    assert GOOGLE_KEY not in kept
    replayed = platforms.submissions("google_ads", body=kept.encode(), headers={})
    assert replayed == read("google_ads", request)


def test_the_logged_body_holds_only_storable_text():
    assert platforms.loggable_body("generic", b'{"a": "x\x00y\xff"}') == '{"a": "xy\ufffd"}'
