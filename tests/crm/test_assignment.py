"""New outreach tasks get an owner: a rule's named owner, else round-robin among the store's reps on shift."""

import threading
from collections import Counter
from datetime import UTC, datetime, time, timedelta
from itertools import count

import pytest
from django.contrib.auth.models import Group, Permission
from django.db import connection, transaction
from django.urls import reverse
from pytest_django.asserts import assertContains

from crm.assignment import task_owner_pick
from crm.models import AssignmentRule, Contact, RepProfile, Task
from crm.services import lead_created_process
from foundation.staff_groups import MANAGERS, SALES

pytestmark = pytest.mark.django_db

ALL_WEEK = [1, 2, 3, 4, 5, 6, 7]
# A Wednesday: 10:00 in New York, 16:00 in Berlin, 23:00 in Tokyo.
WEDNESDAY = datetime(2026, 6, 10, 14, 0, tzinfo=UTC)
_numbers = count(1)


@pytest.fixture
def make_rep(django_user_model, store):
    """A Sales user working `store` (or `stores`) with a rep profile: on shift all week, all day, room for 200
    open tasks, by default."""

    def make(name, *, stores=None, profile=True, groups=(SALES,), **hours):
        user = django_user_model.objects.create_user(name, email=f"{name}@staff.example.com", is_staff=True)
        user.groups.add(*Group.objects.filter(name__in=groups))
        for each in [store] if stores is None else stores:
            each.staff.add(user)
        if profile:
            values = {"work_days": ALL_WEEK, "work_start": time(0, 0), "work_end": time(0, 0), "max_open_tasks": 200}
            values |= hours
            RepProfile.objects.create(user=user, **values)
        return user

    return make


def open_task(store, owner_id, *, status=Task.Status.PENDING) -> Task:
    """A lead's outreach task as the lead processor writes it, owned by `owner_id`."""
    n = next(_numbers)
    contact = Contact.objects.create(
        store=store, email=f"person{n}@example.com", franchise="OrangeTheory", account_id="acct-0421"
    )
    return Task.objects.create(
        contact=contact, store=store, task_type="lead_outreach", type_category="lead_outreach", source_type="lead",
        status=status, due_at=WEDNESDAY + timedelta(minutes=5), assigned_to_id=owner_id,
    )  # fmt: skip


def assign_leads(store, n, *, service_type="", channel="web_form", now=None) -> Counter:
    """`n` leads arriving one after another: each task gets the owner picked for it, in its own transaction."""
    owners = Counter()
    for _ in range(n):
        with transaction.atomic():
            owner = task_owner_pick(store_id=store.pk if store else None, service_type=service_type, channel=channel,
                                    now=now)  # fmt: skip
            open_task(store, owner)
        owners[owner] += 1
    return owners


def test_round_robin_shares_100_leads_fairly_among_the_reps_who_take_leads(make_rep, store, django_user_model):
    ana, ben, cho = make_rep("ana"), make_rep("ben"), make_rep("cho")
    make_rep("off", work_days=[])  # works no day
    make_rep("away", is_away=True)
    full = make_rep("full", max_open_tasks=2)
    open_task(store, full.pk), open_task(store, full.pk)  # at the cap already
    make_rep("plain", profile=False)  # staff of the store, but no rep
    other_store = store.__class__.objects.create(franchise="OrangeTheory", name="Uptown", account_id="acct-9")
    make_rep("elsewhere", stores=[other_store])

    owners = assign_leads(store, 100)

    assert set(owners) == {ana.pk, ben.pk, cho.pk}
    assert all(33 <= owners[rep.pk] <= 34 for rep in (ana, ben, cho)), owners


def test_leads_processed_on_arrival_get_their_owners_in_turn(make_rep, make_lead, store):
    reps = [make_rep(name) for name in ("ana", "ben", "cho", "dee")]
    make_rep("off", work_days=[])
    for n in range(100):
        lead_created_process(lead_id=make_lead(phone=f"+1415555{n:04d}", email=f"person{n}@example.com").pk)
    owners = Counter(Task.objects.values_list("assigned_to", flat=True))
    assert owners == {rep.pk: 25 for rep in reps}


def test_a_rep_reaching_the_cap_drops_out_and_the_others_share_the_rest(make_rep, store):
    ana, ben, cho = make_rep("ana"), make_rep("ben"), make_rep("cho")
    capped = make_rep("capped", max_open_tasks=10)

    owners = assign_leads(store, 100)

    assert owners[capped.pk] == 10
    assert all(29 <= owners[rep.pk] <= 31 for rep in (ana, ben, cho)), owners


def test_a_task_done_frees_a_place_under_the_cap(make_rep, store):
    rep = make_rep("solo", max_open_tasks=1)
    first = open_task(store, rep.pk)
    assert task_owner_pick(store_id=store.pk, service_type="", channel="email") is None, "at the cap: nobody"
    Task.objects.filter(pk=first.pk).update(status="done")
    assert task_owner_pick(store_id=store.pk, service_type="", channel="email") == rep.pk


def test_only_reps_on_shift_in_their_own_time_zone_take_leads(make_rep, store):
    weekdays = {"work_days": [1, 2, 3, 4, 5], "work_start": time(9, 0), "work_end": time(17, 0)}
    new_york = make_rep("ny", timezone="America/New_York", **weekdays)  # 10:00 Wednesday: on shift
    make_rep("ny_weekends", timezone="America/New_York", **{**weekdays, "work_days": [6, 7]})
    berlin = make_rep("berlin", timezone="Europe/Berlin", **weekdays)  # 16:00: on shift
    make_rep("tokyo", timezone="Asia/Tokyo", **weekdays)  # 23:00: gone home
    # Nights from 22:00: Wednesday's shift has started at 23:00 in Tokyo, Thursday's has not.
    night = make_rep("night", timezone="Asia/Tokyo", work_days=[3], work_start=time(22, 0), work_end=time(6, 0))
    make_rep("thursday_night", timezone="Asia/Tokyo", work_days=[4], work_start=time(22, 0), work_end=time(6, 0))

    owners = assign_leads(store, 30, now=WEDNESDAY)

    assert owners == {new_york.pk: 10, berlin.pk: 10, night.pk: 10}
    # 20:00 UTC: 16:00 in New York; the night shift still runs at 05:00 on Thursday morning in Tokyo.
    assert assign_leads(store, 2, now=datetime(2026, 6, 10, 20, 0, tzinfo=UTC)) == {new_york.pk: 1, night.pk: 1}


def test_nobody_on_shift_leaves_the_task_unassigned(make_rep, store):
    make_rep("off", work_days=[])
    make_rep("away", is_away=True)
    assert task_owner_pick(store_id=store.pk, service_type="diagnostic", channel="web_form") is None


def test_a_rule_names_the_owner_before_round_robin(make_rep, store):
    ana, ben, expert = make_rep("ana"), make_rep("ben"), make_rep("expert")
    AssignmentRule.objects.create(store=store, service_type="diagnostic", owner=expert, priority=10)
    AssignmentRule.objects.create(store=store, channel="facebook", owner=ana, priority=20)
    AssignmentRule.objects.create(store=store, service_type="dedicated_team", owner=ben, is_active=False)
    other_store = store.__class__.objects.create(franchise="OrangeTheory", name="Uptown", account_id="acct-9")
    AssignmentRule.objects.create(store=other_store, owner=make_rep("elsewhere", stores=[other_store]))

    assert assign_leads(store, 5, service_type="diagnostic") == {expert.pk: 5}
    assert assign_leads(store, 3, service_type="diagnostic", channel="facebook") == {expert.pk: 3}, "priority"
    assert assign_leads(store, 3, service_type="strategic_advice", channel="facebook") == {ana.pk: 3}
    # No rule (the inactive one and the other store's do not count): round-robin among all three.
    assert set(assign_leads(store, 6, service_type="dedicated_team")) == {ana.pk, ben.pk, expert.pk}


def test_a_rules_owner_off_shift_away_or_gone_from_the_store_falls_through(make_rep, store):
    ana = make_rep("ana")
    off = make_rep("off", work_days=[])
    away = make_rep("away", is_away=True)
    moved = make_rep("moved")
    store.staff.remove(moved)
    for priority, owner in enumerate((off, away, moved), start=1):
        AssignmentRule.objects.create(store=store, service_type="diagnostic", owner=owner, priority=priority)
    assert assign_leads(store, 3, service_type="diagnostic") == {ana.pk: 3}
    assert RepProfile.objects.get(user=ana).last_assigned_at is not None, "round-robin chose her"


def test_leads_of_no_store_go_to_reps_who_see_every_store(make_rep, store):
    make_rep("store_rep")  # works one store: never sees the shared pool's tasks
    manager = make_rep("manager", stores=[], groups=(SALES, MANAGERS))
    assert assign_leads(None, 4) == {manager.pk: 4}
    AssignmentRule.objects.create(store=None, channel="webhook", owner=manager)
    assert task_owner_pick(store_id=None, service_type="", channel="webhook") == manager.pk


@pytest.mark.django_db(transaction=True)
def test_concurrent_arrivals_are_shared_fairly(make_rep, store):
    reps = [make_rep(f"rep{n}") for n in range(4)]
    barrier, errors = threading.Barrier(12), []

    def arrive():
        try:
            barrier.wait()
            with transaction.atomic():
                open_task(store, task_owner_pick(store_id=store.pk, service_type="", channel="web_form"))
        except Exception as exc:  # collected for the assertion below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=arrive) for _ in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    owners = Counter(Task.objects.values_list("assigned_to", flat=True))
    assert owners == {rep.pk: 3 for rep in reps}


# --- the admin: reps flip their own away switch; managers set hours, caps and rules -------------------


def test_a_rep_flips_their_own_away_switch_from_the_work_queue(client, make_rep, store):
    rep = make_rep("ana")
    assert not rep.has_perm("crm.change_repprofile"), "Sales hold no permission on profiles"
    client.force_login(rep)
    queue = client.get(reverse("admin:crm_task_queue"))
    assertContains(queue, "I'm away")

    client.post(reverse("admin:crm_repprofile_my_away"), {"away": "1"})
    assert RepProfile.objects.get(user=rep).is_away
    assert task_owner_pick(store_id=store.pk, service_type="", channel="email") is None
    assertContains(client.get(reverse("admin:crm_task_queue")), "I'm back")

    client.post(reverse("admin:crm_repprofile_my_away"), {"away": "0"})
    assert task_owner_pick(store_id=store.pk, service_type="", channel="email") == rep.pk
    assert client.get(reverse("admin:crm_repprofile_changelist")).status_code == 403


def test_staff_who_are_no_rep_have_no_away_switch(client, make_rep):
    plain = make_rep("plain", profile=False)
    client.force_login(plain)
    assert "I'm away" not in client.get(reverse("admin:crm_task_queue")).content.decode()
    assert client.post(reverse("admin:crm_repprofile_my_away"), {"away": "1"}).status_code == 404


def test_a_store_manager_sees_and_edits_only_the_reps_of_their_stores(client, make_rep, store):
    ana = make_rep("ana")
    other_store = store.__class__.objects.create(franchise="OrangeTheory", name="Uptown", account_id="acct-9")
    stranger = make_rep("stranger", stores=[other_store])
    lead = make_rep("lead", profile=False)
    lead.user_permissions.add(*Permission.objects.filter(codename__in=["view_repprofile", "change_repprofile"]))
    client.force_login(lead)

    listing = client.get(reverse("admin:crm_repprofile_changelist"))
    assert [p.user for p in listing.context["cl"].result_list] == [ana]
    assert client.get(reverse("admin:crm_repprofile_change", args=[stranger.rep_profile.pk])).status_code == 404

    page = reverse("admin:crm_repprofile_change", args=[ana.rep_profile.pk])
    form = {
        "user": ana.pk, "manager": stranger.pk, "timezone": "Europe/Berlin", "work_days": ["1", "2"],
        "work_start": "08:00", "work_end": "16:00", "max_open_tasks": "5",
    }  # fmt: skip
    refused = client.post(page, form)
    assert "manager" in refused.context["adminform"].form.errors, "a manager outside their stores"
    assert client.post(page, {**form, "manager": lead.pk, "timezone": "Mars/Olympus"}).status_code == 200
    assert client.post(page, {**form, "manager": lead.pk}).status_code == 302
    profile = RepProfile.objects.get(user=ana)
    assert (profile.manager, profile.timezone, profile.work_days, profile.max_open_tasks) == (lead, "Europe/Berlin",
                                                                                              [1, 2], 5)  # fmt: skip


def test_a_rule_names_only_a_rep_of_its_store(admin_client, make_rep, store):
    ana = make_rep("ana")
    plain = make_rep("plain", profile=False)
    other_store = store.__class__.objects.create(franchise="OrangeTheory", name="Uptown", account_id="acct-9")
    stranger = make_rep("stranger", stores=[other_store])
    form = {"store": store.pk, "service_type": "diagnostic", "channel": "", "priority": "10", "is_active": "on"}

    for owner in (plain, stranger):
        refused = admin_client.post(reverse("admin:crm_assignmentrule_add"), {**form, "owner": owner.pk})
        assert "owner" in refused.context["adminform"].form.errors
    assert admin_client.post(reverse("admin:crm_assignmentrule_add"), {**form, "owner": ana.pk}).status_code == 302
    assert task_owner_pick(store_id=store.pk, service_type="diagnostic", channel="email") == ana.pk
    listing = admin_client.get(reverse("admin:crm_assignmentrule_changelist"))
    assert [(rule.store, rule.owner) for rule in listing.context["cl"].result_list] == [(store, ana)]


def test_a_task_of_the_shared_pool_is_assigned_by_hand_to_someone_who_sees_every_store(admin_client, make_rep, store):
    pool_rep = make_rep("pool_rep", stores=[], groups=(SALES, MANAGERS))
    store_rep = make_rep("store_rep")
    task = open_task(None, None)
    page = reverse("admin:crm_task_change", args=[task.pk])
    form = {
        "contact": task.contact_id, "type_category": "lead_outreach", "status": "pending", "priority": "normal",
        "due_at_0": "2026-06-12", "due_at_1": "09:00:00", "action_needed": "on", "suggested_actions": "[]",
    }  # fmt: skip
    refused = admin_client.post(page, {**form, "assigned_to": store_rep.pk})
    assert "assigned_to" in refused.context["adminform"].form.errors, "a store's rep never sees the pool's tasks"
    assert admin_client.post(page, {**form, "assigned_to": pool_rep.pk}).status_code == 302
    task.refresh_from_db()
    assert task.assigned_to == pool_rep
