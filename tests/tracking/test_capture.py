"""Capturing a parsed email: the dedup upsert's rules, and the store mapping it relies on."""

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from crm.intake import LEAD_CREATED
from jobs.models import Job
from leadgen.models import Lead
from standins.lead_emails import STORE_SENDER, lead_message
from tracking.parsing import parse_lead_email
from tracking.selectors import store_mappings
from tracking.services import email_lead_capture

pytestmark = pytest.mark.django_db

ARRIVED = datetime(2026, 3, 16, 18, 5, 9, tzinfo=UTC)


def parsed(**message_fields):
    return parse_lead_email(lead_message(**message_fields), received_at=ARRIVED)


def test_reprocessing_the_same_message_leaves_one_lead_and_one_event(make_store):
    make_store()
    message = parsed()
    first = email_lead_capture(parsed=message)
    synced = [first.synced_at]
    for _ in range(4):
        again = email_lead_capture(parsed=message)
        assert again.pk == first.pk
        synced.append(Lead.objects.get(pk=first.pk).synced_at)
    assert Lead.objects.count() == 1
    assert synced == sorted(synced) and synced[-1] > synced[0], "synced-at is bumped"
    assert list(Job.objects.filter(kind=LEAD_CREATED).values_list("key", flat=True)) == [f"{LEAD_CREATED}:{first.pk}"]


def test_the_same_phone_from_the_same_sender_on_the_same_day_is_one_lead(make_store):
    make_store()
    morning = email_lead_capture(parsed=parsed())
    later = ARRIVED + timedelta(hours=4)
    evening = email_lead_capture(parsed=replace(parsed(lead_type="Online Intro"), received_at=later))
    next_day = email_lead_capture(parsed=replace(parsed(), received_at=ARRIVED + timedelta(days=1)))
    assert evening.pk == morning.pk and next_day.pk != morning.pk


def test_on_conflict_the_lead_type_and_mapping_update_but_a_known_store_is_kept(make_store):
    lead = email_lead_capture(parsed=parsed(tracking_id="LATER", sender="front-desk@elsewhere.example"))
    assert lead.store is None and lead.franchise == ""

    store = make_store(tracking_id="LATER")
    lead = email_lead_capture(parsed=parsed(tracking_id="LATER", sender="front-desk@elsewhere.example"))
    assert (lead.store, lead.franchise, lead.account_id) == (store, "OrangeTheory", "acct-0421"), "mapping filled in"

    store.is_active = False
    store.save()
    lead = email_lead_capture(parsed=parsed(tracking_id="LATER", sender="front-desk@elsewhere.example"))
    assert (lead.store, lead.franchise) == (store, "OrangeTheory"), "a lost mapping never nulls the store"

    store.tracking_id = "OLD"
    store.save()
    make_store(name="Uptown", franchise="Other Brand", account_id="acct-9", tracking_id="LATER", lead_email=None)
    lead = email_lead_capture(parsed=parsed(tracking_id="LATER", sender="front-desk@elsewhere.example"))
    assert (lead.store, lead.franchise, lead.account_id) == (store, "OrangeTheory", "acct-0421"), "nor moves it"

    store.is_active, store.tracking_id, store.franchise = True, "LATER2", "Orangetheory Fitness"
    store.save()
    lead = email_lead_capture(
        parsed=parsed(tracking_id="LATER2", sender="front-desk@elsewhere.example", lead_type="Online Intro", first="X")
    )
    assert lead.franchise == "Orangetheory Fitness", "a corrected store row corrects the lead"
    assert lead.lead_type == "Online Intro", "the lead type follows the latest email"
    assert lead.first_name == "Jane", "other fields keep what the first email said"
    assert Lead.objects.count() == 1


def test_a_rescan_turns_a_failed_parse_into_a_parsed_lead_once_the_parser_understands_it(make_store):
    make_store()
    understood = parsed()
    not_understood = replace(
        understood, phone="", first_name="", last_name="", lead_type="", parse_error="no lead details found"
    )
    failed = email_lead_capture(parsed=not_understood)
    assert failed.parse_state == "failed" and failed.dedup_key == f"{STORE_SENDER}#2026-03-16T18:05:09Z"
    assert not Job.objects.filter(kind=LEAD_CREATED).exists(), "a failed parse emits nothing"

    assert email_lead_capture(parsed=not_understood).pk == failed.pk, "still not understood: the same failed lead"
    fixed = email_lead_capture(parsed=understood, reread=True)
    assert fixed.pk == failed.pk
    assert (fixed.parse_state, fixed.parse_error, fixed.phone) == ("parsed", "", "+14155550132")
    assert fixed.dedup_key == f"{STORE_SENDER}#+14155550132#2026-03-16"
    assert Job.objects.filter(kind=LEAD_CREATED, key=f"{LEAD_CREATED}:{fixed.pk}").exists()


def test_a_failed_parse_without_a_phone_turns_parsed_under_the_same_key(make_store):
    make_store()
    understood = parsed(phone="", email="pat@example.com")
    not_understood = replace(understood, first_name="", last_name="", email="", lead_type="", parse_error="no details")
    failed = email_lead_capture(parsed=not_understood)
    fixed = email_lead_capture(parsed=understood)
    assert (fixed.pk, fixed.parse_state, fixed.email) == (failed.pk, "parsed", "pat@example.com")
    assert Lead.objects.get().parse_error == ""


def test_overlong_fields_are_cut_to_fit(make_store):
    make_store()
    lead = email_lead_capture(parsed=replace(parsed(), subject="S" * 5000, first_name="N" * 500))
    assert (len(lead.email_subject), len(lead.first_name)) == (998, 100)


# --- store mapping ---------------------------------------------------------------------------------


def test_store_mapping_prefers_the_tracking_id_and_ignores_case(make_store):
    by_tracking = make_store(tracking_id="ST0421", lead_email="other@studio.example")
    by_sender = make_store(name="Uptown", tracking_id="UP1", lead_email=STORE_SENDER)
    mappings = store_mappings()
    assert mappings.lookup(tracking_id="st0421", lead_emails=(STORE_SENDER.upper(),)).store_id == by_tracking.pk
    assert mappings.lookup(tracking_id="", lead_emails=(STORE_SENDER.upper(),)).store_id == by_sender.pk
    assert mappings.lookup(tracking_id="UNKNOWN", lead_emails=("x@y.example", STORE_SENDER)).store_id == by_sender.pk
    assert mappings.lookup(tracking_id="UNKNOWN", lead_emails=("x@y.example", "")) is None


def test_a_forward_maps_by_the_original_recipient_when_the_forwarder_is_unknown(make_store):
    store = make_store(tracking_id=None, lead_email="downtown@studio.example.com")
    forward = (
        b"From: someone@gmail.example\nTo: inbox@leads.example.org\nSubject: Fwd: New Web Lead\n\n"
        b"---------- Forwarded message ---------\nFrom: noreply@otf-mail.example.com\n"
        b"To: Downtown <Downtown@studio.example.com>\n\nName: Jane Doe\nPhone: 415 555 0132\n"
    )
    lead = email_lead_capture(parsed=parse_lead_email(forward, received_at=ARRIVED))
    assert lead.store == store


def test_store_mapping_is_cached_and_refreshed_when_a_store_changes(
    make_store, django_assert_num_queries, django_capture_on_commit_callbacks
):
    store = make_store()
    store_mappings().lookup(tracking_id="ST0421", lead_emails=())
    with django_assert_num_queries(0):
        assert store_mappings().lookup(tracking_id="ST0421", lead_emails=()).franchise == "OrangeTheory"

    with django_capture_on_commit_callbacks(execute=True):
        store.franchise = "Renamed"
        store.save()
    assert store_mappings().lookup(tracking_id="ST0421", lead_emails=()).franchise == "Renamed"

    store.is_active = False
    store.save()
    assert store_mappings().lookup(tracking_id="ST0421", lead_emails=()) is None, "inactive stores map nothing"

    other = make_store(name="Other", tracking_id="GONE", lead_email=None)
    assert store_mappings().lookup(tracking_id="GONE", lead_emails=()) is not None
    other.delete()
    assert store_mappings().lookup(tracking_id="GONE", lead_emails=()) is None
