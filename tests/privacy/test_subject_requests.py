"""Data-subject requests through `manage.py subject_export` and `subject_erase`: the export holds every row
seeded for the person and nothing of anyone else; after the erasure no text column of any table holds their
email, phone or name, and the audit record, which holds none of them either, says what went."""

import json
from io import StringIO

import pytest
from django.contrib.admin.models import LogEntry
from django.core.management import CommandError, call_command
from django.db import connection

from leadgen.models import Lead
from privacy import services
from privacy.models import SubjectRequest
from privacy.selectors import subject_named
from sources.models import InboundRequest, InboundSource

pytestmark = pytest.mark.django_db

TEXT_TYPES = ("text", "character varying", "character", "json", "jsonb", "ARRAY")


def columns_holding(text: str) -> list[str]:
    """Every table.column of the database, as information_schema lists them, holding `text` in any case."""
    pattern = "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    quote = connection.ops.quote_name
    found = []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_name, column_name FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND data_type = ANY(%s) ORDER BY table_name, column_name",
            [list(TEXT_TYPES)],
        )
        columns = cursor.fetchall()
        assert len(columns) > 100, "every text column of every table"
        for table, column in columns:
            cursor.execute(f"SELECT 1 FROM {quote(table)} WHERE {quote(column)}::text ILIKE %s LIMIT 1", [pattern])
            if cursor.fetchone():
                found.append(f"{table}.{column}")
    return found


def export(tmp_path, **subject) -> dict:
    path = tmp_path / "export.json"
    call_command("subject_export", **subject, output=str(path), actor="dpo@northwind", stderr=StringIO())
    return json.loads(path.read_text())


def exported_ids(document, table) -> set:
    return {row["id"] for row in document["rows"].get(table, [])}


def test_the_export_holds_every_row_seeded_for_the_person_and_nothing_of_anyone_else(tmp_path, zephyrine, barnaby):
    document = export(tmp_path, email="  Zephyrine.Q@Orchard.example ")

    assert len(zephyrine.rows) >= 15
    for table, ids in zephyrine.rows.items():
        assert ids <= exported_ids(document, table), table
    for table, ids in barnaby.rows.items():
        assert not ids & exported_ids(document, table), table
    text = json.dumps(document).lower()
    for identifier in barnaby.identifiers:
        assert identifier.lower() not in text, identifier
    lead = next(lead for lead in document["rows"]["leadgen_lead"] if lead["channel"] == "web_form")
    assert lead["consent_text"].startswith("I agree") and lead["consent_version"]
    held = {(held["service"], held["what"]) for held in document["held_elsewhere"]}
    assert {("V0", "prototype chat"), ("ClickUp", "prototype alert task"), ("Auth0", "user")} <= held

    audit = SubjectRequest.objects.get()
    assert (audit.kind, audit.actor) == ("export", "dpo@northwind") and audit.finished_at is not None
    assert audit.rows == document["counts"] and audit.rows["crm_timelineevent"] == 2


def test_the_phone_alone_finds_all_of_it_through_the_leads_that_gave_both(tmp_path, zephyrine, barnaby):
    by_email = export(tmp_path, email=zephyrine.email)
    by_phone = export(tmp_path, phone="(415) 555-0199")
    assert by_phone["subject"]["emails"] == [zephyrine.email]
    assert {table: exported_ids(by_phone, table) for table in by_phone["rows"]} == {
        table: exported_ids(by_email, table) for table in by_email["rows"]
    }


def test_after_erasure_no_table_holds_the_persons_email_phone_or_name(zephyrine, barnaby):
    assert columns_holding(zephyrine.email), "the search finds what is there"
    out = StringIO()
    call_command("subject_erase", email=zephyrine.email, interactive=False, actor="dpo@northwind", stdout=out)

    for identifier in zephyrine.identifiers:
        assert columns_holding(identifier) == [], identifier
    theirs = columns_holding(barnaby.email) + columns_holding(barnaby.last_name)
    for table in ("leadgen_lead", "crm_contact", "crm_task", "crm_timelineevent", "chat_chatmessage", "jobs_job",
                  "sources_inboundrequest", "tracking_trackeduser", "django_admin_log"):  # fmt: skip
        assert any(column.startswith(f"{table}.") for column in theirs), f"someone else's {table} stays"

    audit = SubjectRequest.objects.get()
    assert (audit.kind, audit.actor) == ("erase", "dpo@northwind") and audit.finished_at is not None
    for table, ids in zephyrine.rows.items():
        assert audit.rows[table] >= len(ids), table
    assert audit.rows["crm_contact"] == 1 and audit.rows["django_admin_log"] == 2
    assert LogEntry.objects.filter(object_repr="[erased]").count() == 2, "staff's history stays, anonymized"
    report = out.getvalue()
    assert f"Erased (subject request #{audit.pk})" in report and "crm_timelineevent: 2" in report
    assert "V0 prototype chat: v0-" in report and "Auth0 user: auth0|" in report


def test_an_erasure_that_fails_midway_changes_nothing(zephyrine):
    with connection.cursor() as cursor:  # the database refuses the last app's delete
        cursor.execute(
            "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused'; END $$;"
            " CREATE TRIGGER refuse BEFORE DELETE ON jobs_job FOR EACH ROW EXECUTE FUNCTION refuse();"
        )
    before = columns_holding(zephyrine.email)
    with pytest.raises(Exception, match="refused"):
        services.subject_erase(subject=subject_named(email=zephyrine.email), actor="dpo")
    assert columns_holding(zephyrine.email) == before
    assert not SubjectRequest.objects.exists()


def test_a_dry_run_lists_what_would_go_and_changes_nothing(zephyrine):
    out = StringIO()
    call_command("subject_erase", phone=zephyrine.phone, dry_run=True, stdout=out)
    assert "crm_contact: 1" in out.getvalue() and "Held by outside services" in out.getvalue()
    assert columns_holding(zephyrine.email) and not SubjectRequest.objects.exists()


@pytest.mark.parametrize(
    "options, message",
    [
        ({}, "--email: Give an email, a phone, or both."),
        ({"email": "not an email"}, "--email: Enter an email address."),
        ({"phone": "12"}, "--phone: Enter a phone number"),
    ],
)
def test_a_request_names_someone(db, options, message):
    with pytest.raises(CommandError, match=message):
        call_command("subject_export", **options, stdout=StringIO())
    assert not SubjectRequest.objects.exists()


def test_a_logged_request_holding_two_peoples_leads_keeps_the_other_ones(zephyrine, barnaby, store):
    """A Facebook notification names several leads by id; each is fetched from the Graph API into the same row."""
    ours, theirs = (Lead.objects.get(email=person.email, channel="webhook") for person in (zephyrine, barnaby))
    source = InboundSource.objects.create(name="Facebook", kind="facebook", store=store)
    request = InboundRequest.objects.create(
        source=source, outcome="created", signature_ok=True, lead=ours, body='{"entry": [{"leadgen_id": "1"}, 2]}',
        results={"fb-1": {"outcome": "created", "lead_id": ours.pk},
                 "fb-2": {"outcome": "created", "lead_id": theirs.pk}},
        fetched={"fb-1": {"field_data": [{"name": "email", "values": [zephyrine.email]}]},
                 "fb-2": {"field_data": [{"name": "email", "values": [barnaby.email]}]}},
    )  # fmt: skip
    call_command("subject_erase", email=zephyrine.email, interactive=False, stdout=StringIO())

    request.refresh_from_db()
    assert request.fetched == {"fb-2": {"field_data": [{"name": "email", "values": [barnaby.email]}]}}
    assert request.body == '{"entry": [{"leadgen_id": "1"}, 2]}', "ids only, and a lead that is someone else's"
    assert request.lead_id is None and request.outcome == "created"
