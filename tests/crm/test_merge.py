"""Likely duplicate contacts for staff, and merging two of them in the admin: preview, merge, refusals."""

import threading
import time
from datetime import UTC, datetime, timedelta
from itertools import count

import pytest
from django.contrib.auth.models import Group
from django.db import connection, transaction
from django.test import Client
from django.urls import reverse
from pytest_django.asserts import assertContains, assertNotContains

from crm import identity, merge
from crm.models import Contact, Task, TimelineEvent
from crm.selectors import DUPLICATE_SUSPECTED_EVENT, contact_duplicates
from foundation.staff_groups import MANAGERS, SALES
from stores.models import Store

pytestmark = pytest.mark.django_db

NOON = datetime(2026, 6, 10, 16, 0, tzinfo=UTC)
_keys = count(1)
DUPLICATES = reverse("admin:crm_contact_duplicates")


def merge_url(a, b):
    return reverse("admin:crm_contact_merge", args=[a.pk, b.pk])


@pytest.fixture
def other_store(db):
    return Store.objects.create(franchise="OrangeTheory", name="Uptown", account_id="acct-0777", timezone="UTC")


def contact(store, *, age_days=0, **fields):
    """A contact created `age_days` before the others of age 0 (the older one survives a merge)."""
    made = Contact.objects.create(store=store, franchise=store.franchise if store else "", **fields)
    Contact.objects.filter(pk=made.pk).update(created_at=NOON - timedelta(days=age_days))
    made.refresh_from_db()
    return made


def event(of, *, event_type="lead.created", entity_id="", at=NOON, **values):
    return TimelineEvent.objects.create(
        contact=of, store=of.store, event_type=event_type, event_category="lead", entity_type="lead",
        entity_id=entity_id or str(next(_keys)), occurred_at=at, new_value=values,
        idempotency_key=f"test:{next(_keys)}",
    )  # fmt: skip


def pending_task(of, *, due_at):
    return Task.objects.create(
        contact=of, store=of.store, task_type=Task.TaskType.LEAD_OUTREACH, type_category=Task.TaskType.LEAD_OUTREACH,
        source_type=Task.SourceType.LEAD, due_at=due_at,
    )  # fmt: skip


def staff_client(django_user_model, username, *groups, stores=()):
    user = django_user_model.objects.create_user(username, is_staff=True)
    user.groups.add(*[Group.objects.get(name=name) for name in groups])
    for store in stores:
        store.staff.add(user)
    client = Client()
    client.force_login(user)
    return user, client


@pytest.fixture
def sales(django_user_model, store):
    return staff_client(django_user_model, "sales", SALES, stores=[store])


@pytest.fixture
def manager(django_user_model):
    return staff_client(django_user_model, "manager", SALES, MANAGERS)


def pairs_of(store_ids):
    return {
        (pair.first.pk, pair.second.pk): pair.reasons for pair in contact_duplicates(store_ids=store_ids)
    }  # fmt: skip


# --- likely duplicates -----------------------------------------------------------------------------


def test_the_same_mailbox_or_phone_written_differently_and_the_same_name_at_a_company_are_listed(store):
    gmail = contact(store, age_days=3, email="jane.doe+promo@gmail.com")
    googlemail = contact(store, email="janedoe@googlemail.com")
    tagged = contact(store, age_days=2, email="Bob+news@Example.com")
    plain = contact(store, email="bob@example.com")
    dotted = contact(store, email="b.ob@example.com")  # not Gmail: the dot makes another mailbox
    formatted = contact(store, age_days=1, phone="+1 (415) 555-0132")
    e164 = contact(store, phone="+14155550132")
    named = contact(store, age_days=1, email="ana@one.example", first_name="Ana", last_name="Ruiz", company="Acme")
    renamed = contact(store, email="ana@two.example", first_name=" ana", last_name="RUIZ", company="acme ")
    contact(store, email="ana@three.example", first_name="Ana", last_name="Ruiz")  # no company: only a namesake

    assert pairs_of(None) == {
        (gmail.pk, googlemail.pk): ("same email",),
        (tagged.pk, plain.pk): ("same email",),
        (formatted.pk, e164.pk): ("same phone",),
        (named.pk, renamed.pk): ("same name and company",),
    }
    assert dotted.pk not in {pk for pair in pairs_of(None) for pk in pair}


def test_duplicates_are_never_across_stores_and_the_shared_pool_is_one_store(store, other_store):
    contact(store, email="jo@example.com")
    contact(other_store, email="JO@example.com")
    pooled = contact(None, age_days=1, email="jo@example.com")
    pooled_again = contact(None, email="jo+x@example.com")

    assert pairs_of(None) == {(pooled.pk, pooled_again.pk): ("same email",)}
    assert pairs_of(frozenset([store.pk, other_store.pk])) == {}, "the shared pool is for who sees every store"


def test_three_contacts_of_one_person_pair_the_oldest_with_each_other_and_reasons_combine(store):
    oldest = contact(store, age_days=2, email="kim@example.com", first_name="Kim", last_name="Lee", company="Co")
    middle = contact(store, age_days=1, email="KIM+a@example.com")
    newest = contact(store, phone="+14155550100", email="kim+b@example.com", first_name="Kim", last_name="Lee",
                     company="Co")  # fmt: skip
    assert pairs_of(None) == {
        (oldest.pk, newest.pk): ("same email", "same name and company"),
        (oldest.pk, middle.pk): ("same email",),
    }
    assert [pair.second for pair in contact_duplicates(store_ids=None)] == [newest, middle], "newest first"


def test_an_arrival_whose_email_and_phone_were_two_contacts_lists_them(store):
    by_email = contact(store, age_days=1, email="lee@example.com")
    by_phone = contact(store, phone="+14155550199")
    event(by_email, event_type=DUPLICATE_SUSPECTED_EVENT, entity_id=str(by_phone.pk))
    assert pairs_of(None) == {(by_email.pk, by_phone.pk): ("email of one, phone of the other",)}


def test_the_duplicates_page_shows_the_users_stores_only(sales, store, other_store):
    user, client = sales
    mine = contact(store, age_days=1, email="pat@example.com")
    contact(store, email="p.a.t@example.com")  # another mailbox: no Gmail
    tagged = contact(store, email="pat+1@example.com", phone="+14155550111")
    contact(other_store, age_days=1, email="sam@example.com")
    contact(other_store, email="sam+1@example.com")

    page = client.get(DUPLICATES)

    assert page.status_code == 200
    assert {(pair.first.store_id, pair.second.store_id) for pair in page.context["pairs"]} == {(store.pk, store.pk)}
    assertContains(page, merge_url(mine, tagged))
    assertNotContains(page, "sam@example.com")
    assertContains(client.get(reverse("admin:crm_contact_changelist")), DUPLICATES)


# --- preview -----------------------------------------------------------------------------------------


def test_the_preview_shows_which_value_wins_field_by_field(sales, store):
    user, client = sales
    older = contact(store, age_days=5, email="ada@example.com", first_name="Ada", last_name="")
    newer = contact(store, phone="+14155550132", first_name="Adaline", last_name="Byron", company="Engines")
    event(newer)
    pending_task(older, due_at=NOON)
    pending_task(newer, due_at=NOON + timedelta(hours=1))

    page = client.get(merge_url(newer, older))  # either order: the older one is kept

    assert page.status_code == 200
    plan = page.context["plan"]
    assert (plan.survivor, plan.other) == (older, newer)
    winners = {choice.name: (choice.source, choice.value) for choice in plan.fields if choice.differs}
    assert winners == {
        "first_name": ("survivor", "Ada"),  # both have one: the older contact's
        "last_name": ("other", "Byron"),  # the older has none
        "phone": ("other", "+14155550132"),
        "email": ("survivor", "ada@example.com"),
        "company": ("other", "Engines"),
    }
    assertContains(page, '<input type="radio" name="pick_first_name" value="survivor" checked>', html=False)
    assertContains(page, '<input type="radio" name="pick_last_name" value="other" checked>', html=False)
    assert page.context["moves"] == "1 task, 1 timeline event"
    assertContains(page, "the one due first stays")
    assertContains(page, 'name="csrfmiddlewaretoken"')
    assert Contact.objects.count() == 2, "a preview changes nothing"


# --- merge -------------------------------------------------------------------------------------------


def post_merge(client, a, b, **picks):
    page = client.get(merge_url(a, b))
    plan = page.context["plan"]
    form = {
        "survivor_seen": plan.survivor.updated_at.isoformat(), "other_seen": plan.other.updated_at.isoformat(),
        **{f"pick_{c.name}": c.source for c in plan.fields if c.differs},
        **{f"pick_{name}": side for name, side in picks.items()},
    }  # fmt: skip
    return client.post(merge_url(a, b), form)


def test_a_merge_moves_every_related_row_to_the_older_contact_and_records_who_merged(sales, store):
    user, client = sales
    older = contact(store, age_days=5, email="ada@example.com", first_name="Ada", last_activity_at=NOON)
    newer = contact(store, phone="+14155550132", first_name="Adaline", last_name="Byron",
                    last_activity_at=NOON + timedelta(days=1))  # fmt: skip
    kept_events = [event(older), event(older)]
    moved_events = [event(newer), event(newer, event_type="chat.linked")]
    done = Task.objects.create(
        contact=newer, store=store, task_type="lead_outreach", type_category="lead_outreach", status="done",
        due_at=NOON, completed_at=NOON,
    )  # fmt: skip
    covering = pending_task(newer, due_at=NOON)  # due first: it stays, on the survivor
    cancelled = pending_task(older, due_at=NOON + timedelta(hours=2))

    response = post_merge(client, older, newer, first_name="other")

    assert response.status_code == 302
    assert response["Location"] == reverse("admin:crm_contact_change", args=[older.pk])
    assert not Contact.objects.filter(pk=newer.pk).exists()
    older.refresh_from_db()
    assert (older.email, older.phone, older.first_name, older.last_name) == (
        "ada@example.com", "+14155550132", "Adaline", "Byron",
    )  # fmt: skip
    assert older.last_activity_at == NOON + timedelta(days=1), "the later activity of the two"
    assert set(older.timeline.filter(pk__in=[e.pk for e in kept_events + moved_events])) == {
        *kept_events, *moved_events,
    }  # fmt: skip
    assert set(older.tasks.all()) == {done, covering, cancelled}
    cancelled.refresh_from_db()
    assert cancelled.status == "cancelled"
    assert older.tasks.filter(status="pending").get() == covering
    note = older.timeline.get(event_type=merge.TASK_CANCELLED_EVENT)
    assert note.new_value["covered_by"] == str(covering.pk)
    merged = older.timeline.get(event_type=merge.CONTACT_MERGED_EVENT)
    assert (merged.entity_type, merged.entity_id) == ("contact", str(newer.pk))
    assert merged.new_value["survivor_id"] == older.pk and merged.new_value["merged_id"] == newer.pk
    assert (merged.new_value["by"], merged.new_value["by_id"]) == ("sales", user.pk)
    assert set(merged.new_value["taken_from_merged"]) == {"first_name", "last_name", "phone"}
    assert "Adaline" not in str(merged.new_value), "ids and field names only"
    message = [str(m) for m in client.get(response["Location"]).context["messages"]]
    assert message == [
        f"Merged contact #{newer.pk} into #{older.pk}; moved 2 tasks, 2 timeline events. "
        "Cancelled 1 duplicate pending task(s)."
    ]


def test_the_survivor_may_take_the_merged_contacts_email(sales, store):
    user, client = sales
    older = contact(store, age_days=1, email="old@example.com")
    newer = contact(store, email="new@example.com")
    assert post_merge(client, older, newer, email="other").status_code == 302
    assert Contact.objects.get().email == "new@example.com"


def test_a_merge_keeping_neither_email_nor_phone_is_refused(store):
    older = contact(store, age_days=1, email="only@example.com")
    newer = contact(store, phone="+14155550132")
    with pytest.raises(merge.MergeRefused, match="Keep an email or a phone"):
        merge.merge_plan(first=older, second=newer, picks={"email": "other", "phone": "survivor"})


def test_a_merge_across_stores_is_refused_and_changes_nothing(manager, store, other_store):
    user, client = manager
    here, there = contact(store, email="jo@example.com"), contact(other_store, email="jo@example.com")
    pooled = contact(None, email="jo@example.com")
    event(there)

    for a, b in ((here, there), (here, pooled)):
        preview = client.get(merge_url(a, b))
        assert preview.status_code == 409
        assertContains(preview, "different stores", status_code=409)
        assert "merge-form" not in preview.content.decode()
        posted = client.post(merge_url(a, b), {"survivor_seen": a.updated_at.isoformat(),
                                               "other_seen": b.updated_at.isoformat()})  # fmt: skip
        assert posted.status_code == 409
    assert Contact.objects.count() == 3
    assert there.timeline.count() == 1
    with pytest.raises(merge.MergeRefused, match="different stores"):
        merge.contacts_merge(first_id=here.pk, second_id=there.pk, picks={}, actor=user)


def test_contacts_of_another_store_are_not_found_and_view_only_staff_may_not_merge(
    sales, store, other_store, django_user_model
):
    user, client = sales
    mine, theirs = contact(store, email="a@example.com"), contact(other_store, email="b@example.com")
    assert client.get(merge_url(mine, theirs)).status_code == 404
    assert client.post(merge_url(mine, theirs), {}).status_code == 404

    viewer, viewer_client = staff_client(django_user_model, "viewer", stores=[store])
    viewer.user_permissions.add(*Group.objects.get(name=SALES).permissions.filter(codename="view_contact"))
    other = contact(store, email="a+b@example.com")
    assert viewer_client.get(DUPLICATES).status_code == 200
    assertNotContains(viewer_client.get(DUPLICATES), "Review merge")
    assert viewer_client.get(merge_url(mine, other)).status_code == 403
    assert viewer_client.post(merge_url(mine, other), {}).status_code == 403
    assert Contact.objects.count() == 3


def test_a_merge_without_the_csrf_token_is_refused(sales, store):
    user, _ = sales
    older, newer = contact(store, age_days=1, email="c@example.com"), contact(store, email="c+1@example.com")
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(user)
    form = {"survivor_seen": older.updated_at.isoformat(), "other_seen": newer.updated_at.isoformat()}
    assert browser.post(merge_url(older, newer), form).status_code == 403
    assert Contact.objects.count() == 2


def test_a_contact_changed_since_the_preview_refuses_the_merge(sales, store):
    user, client = sales
    older, newer = contact(store, age_days=1, email="d@example.com"), contact(store, email="d+1@example.com")
    preview = client.get(merge_url(older, newer)).context["plan"]
    Contact.objects.filter(pk=newer.pk).update(first_name="Dee", updated_at=NOON + timedelta(days=9))
    form = {
        "survivor_seen": preview.survivor.updated_at.isoformat(), "other_seen": preview.other.updated_at.isoformat(),
        "pick_email": "survivor",
    }  # fmt: skip

    response = client.post(merge_url(older, newer), form, follow=True)

    assert [str(m) for m in response.context["messages"]] == [
        "Nothing was merged: A contact changed since the preview; review the merge again."
    ]
    assert Contact.objects.count() == 2


def test_the_action_on_the_contact_list_opens_the_preview_of_the_two_selected(sales, store):
    user, client = sales
    a, b = contact(store, age_days=1, email="e@example.com"), contact(store, phone="+14155550132")
    changelist = reverse("admin:crm_contact_changelist")
    response = client.post(changelist, {"action": "merge_selected", "_selected_action": [b.pk, a.pk]})
    assert response["Location"] == merge_url(a, b)
    one = client.post(changelist, {"action": "merge_selected", "_selected_action": [a.pk]}, follow=True)
    assert [str(m) for m in one.context["messages"]] == ["Select exactly two contacts to merge."]


@pytest.mark.django_db(transaction=True)
def test_a_merge_submitted_twice_at_once_merges_once(django_user_model, store):
    user = django_user_model.objects.create_user("merger", is_staff=True)
    older = contact(store, age_days=1, email="f@example.com")
    newer = contact(store, email="f+1@example.com", phone="+14155550132")
    event(newer)
    pending_task(newer, due_at=NOON)
    tries = 6
    barrier, outcomes = threading.Barrier(tries), []

    def submit():
        try:
            barrier.wait()
            outcomes.append(merge.contacts_merge(first_id=older.pk, second_id=newer.pk, picks={}, actor=user))
        except merge.MergeRefused as exc:
            outcomes.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=submit) for _ in range(tries)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    merged = [outcome for outcome in outcomes if isinstance(outcome, merge.MergeResult)]
    assert len(merged) == 1 and len(outcomes) == tries
    assert all("no longer exists" in str(outcome) for outcome in outcomes if outcome not in merged)
    survivor = Contact.objects.get()
    assert survivor.pk == older.pk and survivor.phone == "+14155550132"
    assert survivor.timeline.filter(event_type=merge.CONTACT_MERGED_EVENT).count() == 1
    assert survivor.tasks.count() == 1 and survivor.timeline.count() == 2


def test_submitting_a_merge_again_after_it_went_through_says_so(sales, store):
    user, client = sales
    older, newer = contact(store, age_days=1, email="g@example.com"), contact(store, email="g+1@example.com")
    form = {"survivor_seen": older.updated_at.isoformat(), "other_seen": newer.updated_at.isoformat()}
    assert client.post(merge_url(older, newer), {**form, "pick_email": "survivor"}).status_code == 302
    again = client.post(merge_url(older, newer), {**form, "pick_email": "survivor"})
    assert again["Location"] == reverse("admin:crm_contact_change", args=[older.pk])
    messages = [str(m) for m in client.get(again["Location"]).context["messages"]]
    assert messages[-1] == f"Nothing to do: already merged into #{older.pk}."
    assert Contact.objects.get() == older


@pytest.mark.django_db(transaction=True)
def test_an_arrival_for_the_merged_contact_in_flight_finishes_first_and_its_rows_are_moved(django_user_model, store):
    """The merge takes the identity locks arrivals take: it waits for the arrival, then moves what it wrote."""
    user = django_user_model.objects.create_user("merger", is_staff=True)
    older = contact(store, age_days=1, email="h@example.com")
    # Already as the arrival says: resolving it writes nothing, so only the identity lock orders the two.
    newer = contact(store, email="h+1@example.com", phone="+14155550132", last_activity_at=NOON)
    resolved, errors, merged = [], [], []

    def arrive():
        try:
            with transaction.atomic():
                resolved.append(identity.contact_resolve(
                    store_id=store.pk, person=identity.Person(phone="+14155550132"), seen_at=NOON,
                ))  # fmt: skip
                merging.start()
                _until(lambda: _advisory_lock_waiters() > 0)  # the merge waits for this arrival (or is done)
                event(Contact(pk=resolved[0], store=store), entity_id="arrival")
        except Exception as exc:  # collected for the assertion below
            errors.append(exc)
        finally:
            connection.close()

    def merge_them():
        try:
            merged.append(merge.contacts_merge(first_id=older.pk, second_id=newer.pk, picks={}, actor=user))
        except Exception as exc:  # collected for the assertion below
            errors.append(exc)
        finally:
            connection.close()

    arriving, merging = threading.Thread(target=arrive), threading.Thread(target=merge_them)
    arriving.start()
    arriving.join()
    merging.join()

    assert errors == [], "neither the arrival nor the merge failed"
    assert resolved == [newer.pk], "the arrival joined the contact about to be merged"
    assert len(merged) == 1
    survivor = Contact.objects.get()
    assert survivor.pk == older.pk and survivor.phone == "+14155550132"
    assert survivor.timeline.filter(entity_id="arrival").exists()


def _advisory_lock_waiters() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")
        return cursor.fetchone()[0]


def _until(condition, timeout=5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return False
