"""Store scope fails closed: staff see the stores they are assigned to and nothing else, nobody widens their
own scope, seeing every store is an explicit permission, and the jobs admin, the work queue and tracked users
follow the same rule."""

import pytest
from django.contrib.auth.models import Group, Permission
from django.urls import reverse
from django.utils import timezone

from crm.models import Task
from foundation.staff_groups import MANAGERS, OPERATIONS, SALES
from jobs.models import Job
from prototypes.models import Prototype
from standins.lead_emails import lead_message
from stores.models import Store
from tracking import services as tracking_services
from tracking.models import EmailLead
from tracking.parsing import parse_lead_email

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_stores(make_email_lead, downtown, uptown, completed_prototype):
    mine, theirs = make_email_lead(downtown, first_name="Mine"), make_email_lead(uptown, first_name="Theirs")
    for lead in (mine, theirs):
        completed_prototype(lead, f"https://v0.example.dev/preview/{lead.pk}")
    return mine, theirs


def _shown(client, admin_name):
    response = client.get(reverse(f"admin:{admin_name}_changelist"))
    assert response.status_code == 200
    return set(response.context["cl"].result_list)


def _store_change_form(store, **overrides):
    data = {
        "franchise": store.franchise, "name": store.name, "account_id": store.account_id,
        "store_uuid": str(store.store_uuid), "lead_email": store.lead_email or "", "tracking_id": store.tracking_id,
        "timezone": store.timezone, "quiet_hours_start": "21:00", "quiet_hours_end": "08:00", "is_active": "on",
        "staff": [str(pk) for pk in store.staff.values_list("pk", flat=True)],
    }  # fmt: skip
    return {**data, **overrides}


def test_operations_cannot_remove_themselves_from_their_store(client, staff, downtown, two_stores):
    ops = staff("ops", OPERATIONS, stores=[downtown])
    colleague = staff("colleague", SALES, stores=[downtown])
    client.force_login(ops)
    response = client.post(
        reverse("admin:stores_store_change", args=[downtown.pk]), _store_change_form(downtown, staff=[colleague.pk])
    )
    assert response.status_code == 200 and "staff" in response.context["adminform"].form.errors
    assert set(downtown.staff.all()) == {ops, colleague}


def test_nobody_adds_themselves_to_a_store(client, staff, downtown):
    ops = staff("ops", OPERATIONS, stores=[downtown])
    client.force_login(ops)
    response = client.post(reverse("admin:stores_store_add"), _store_change_form(
        downtown, name="Shadow", store_uuid="", lead_email="", tracking_id="SHADOW", staff=[ops.pk]
    ))  # fmt: skip
    assert response.status_code == 200 and "staff" in response.context["adminform"].form.errors
    assert not Store.objects.filter(name="Shadow").exists()


def test_staff_with_no_store_see_no_store_rows(client, staff, two_stores):
    """What an Operations user would see once their last assignment is gone: nothing of any store."""
    client.force_login(staff("ops", OPERATIONS, SALES))
    for admin_name in ("stores_store", "tracking_emaillead", "prototypes_prototype", "leadgen_lead", "crm_task"):
        assert _shown(client, admin_name) == set(), admin_name
    theirs = two_stores[1]
    assert client.get(reverse("admin:tracking_emaillead_change", args=[theirs.pk])).status_code == 404
    prototype = Prototype.objects.get(lead=theirs)
    assert client.get(reverse("admin:prototypes_prototype_change", args=[prototype.pk])).status_code == 404
    dashboard = client.get(reverse("admin:index"), {"days": "90"})
    assert dashboard.context["stores"] == [] and dashboard.context["funnel"][0][0].count == 0


def test_every_store_is_an_explicit_permission(client, staff, two_stores):
    manager = staff("boss", SALES, OPERATIONS, MANAGERS)
    client.force_login(manager)
    assert _shown(client, "stores_store") == set(Store.objects.all())
    assert _shown(client, "tracking_emaillead") == set(EmailLead.objects.all())
    assert _shown(client, "prototypes_prototype") == set(Prototype.objects.all())


def test_nobody_but_a_superuser_grants_access(client, staff, downtown):
    """Even someone allowed to edit users cannot give themselves the every-store permission or a group."""
    ops = staff("ops", OPERATIONS, stores=[downtown])
    ops.user_permissions.add(*Permission.objects.filter(codename__in=["view_user", "change_user"]))
    every_store = Permission.objects.get(codename="view_all_stores")
    client.force_login(ops)
    page = client.get(reverse("admin:auth_user_change", args=[ops.pk]))
    assert page.status_code == 200
    form_fields = page.context["adminform"].form.fields
    assert not {"groups", "user_permissions", "is_superuser", "is_staff"} & set(form_fields)
    client.post(reverse("admin:auth_user_change", args=[ops.pk]), {
        "username": "ops", "is_active": "on", "is_staff": "on", "is_superuser": "on",
        "groups": [Group.objects.get(name=MANAGERS).pk], "user_permissions": [every_store.pk],
        "last_login_0": "", "last_login_1": "", "date_joined_0": "2026-01-01", "date_joined_1": "00:00:00",
    })  # fmt: skip
    ops.refresh_from_db()
    assert not ops.is_superuser
    assert not ops.groups.filter(name=MANAGERS).exists()
    assert not ops.has_perm("stores.view_all_stores")


def test_the_migration_gives_unassigned_staff_the_every_store_permission():
    """Staff without a store saw every store before scoping failed closed; the migration keeps them working."""
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    before = [("stores", "0002_groups")]
    executor.migrate(before)
    old = executor.loader.project_state(before).apps
    User, Store_ = old.get_model("auth", "User"), old.get_model("stores", "Store")
    User.objects.create(username="manager", is_staff=True)
    clerk = User.objects.create(username="clerk", is_staff=True)
    store = Store_.objects.create(franchise="F", name="S", account_id="a", timezone="UTC")
    store.staff.add(clerk)
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
    from django.contrib.auth import get_user_model

    users = get_user_model().objects
    assert users.get(username="manager").has_perm("stores.view_all_stores")
    assert not users.get(username="clerk").has_perm("stores.view_all_stores")


# --- the jobs admin -----------------------------------------------------------------------------


def _parked_lead(store):
    raw = lead_message(first="Bea", last="Parked", phone="(415) 555-0177", tracking_id=store.tracking_id,
                       sender=store.lead_email)  # fmt: skip
    parsed = parse_lead_email(raw, received_at=timezone.now())
    return tracking_services.email_lead_park(parsed=parsed, source=tracking_services.MessageSource("INBOX", 1, 9))


def test_a_parked_lead_of_another_store_is_out_of_reach(client, staff, downtown, uptown):
    parked = _parked_lead(uptown)
    assert parked.store_id == uptown.pk
    client.force_login(staff("ops", OPERATIONS, stores=[downtown]))
    assert parked not in _shown(client, "jobs_job")
    page = client.get(reverse("admin:jobs_job_change", args=[parked.pk]))
    assert page.status_code == 404 and b"Parked" not in page.content
    for action in ("replay", "discard"):
        client.post(reverse("admin:jobs_job_changelist"),
                    {"action": action, "_selected_action": [parked.pk], "confirmed": "yes"})  # fmt: skip
    parked.refresh_from_db()
    assert parked.status == Job.Status.PENDING and parked.last_error == ""
    # The store's own staff see it; a job of no store (a system job) is for managers only.
    client.force_login(staff("their-ops", OPERATIONS, stores=[uptown]))
    assert client.get(reverse("admin:jobs_job_change", args=[parked.pk])).status_code == 200
    system_job = Job.objects.create(kind="jobs.ping", key="jobs.ping:x", payload={})
    assert system_job not in _shown(client, "jobs_job")
    client.force_login(staff("boss", OPERATIONS, MANAGERS))
    assert {parked, system_job} <= _shown(client, "jobs_job")


def test_a_lead_s_jobs_carry_its_store_and_ids_only(downtown):
    raw = lead_message(first="Ida", last="Ids", phone="(415) 555-0178", tracking_id=downtown.tracking_id,
                       sender=downtown.lead_email)  # fmt: skip
    lead = tracking_services.email_lead_capture(parsed=parse_lead_email(raw, received_at=timezone.now()))
    job = Job.objects.get(payload__lead_id=lead.pk)
    assert job.store_id == downtown.pk and job.payload == {"lead_id": lead.pk}


# --- the work queue and assignment ---------------------------------------------------------------


def test_my_tasks_shows_only_tasks_of_my_stores(client, staff, downtown, uptown, two_stores):
    rep = staff("rep", SALES, stores=[downtown])
    theirs = Task.objects.get(source_lead=two_stores[1])
    Task.objects.filter(pk=theirs.pk).update(assigned_to=rep)  # as a manager's assignment once could
    client.force_login(rep)
    page = client.get(reverse("admin:crm_task_queue"), {"view": "mine"})
    assert str(theirs.pk) not in page.content.decode()
    mine = Task.objects.get(source_lead=two_stores[0])
    assert str(mine.pk) in page.content.decode()


def test_a_task_is_assigned_only_to_staff_of_its_store(client, staff, downtown, uptown, two_stores):
    rep = staff("rep", SALES, stores=[downtown])
    outsider = staff("outsider", SALES, stores=[uptown])
    client.force_login(staff("boss", SALES, MANAGERS))
    task = Task.objects.get(source_lead=two_stores[0])
    page = client.get(reverse("admin:crm_task_change", args=[task.pk]))
    offered = set(page.context["adminform"].form.fields["assigned_to"].queryset)
    assert rep in offered and outsider not in offered
    local = timezone.localtime(task.due_at)
    response = client.post(reverse("admin:crm_task_change", args=[task.pk]), {
        "contact": task.contact_id, "type_category": task.type_category, "status": "pending", "priority": "normal",
        "due_at_0": f"{local:%Y-%m-%d}", "due_at_1": f"{local:%H:%M:%S}", "assigned_to": outsider.pk,
        "suggested_actions": "[]",
    })  # fmt: skip
    assert response.status_code == 200 and "assigned_to" in response.context["adminform"].form.errors
    task.refresh_from_db()
    assert task.assigned_to is None


# --- tracked users ------------------------------------------------------------------------------


def test_tracked_users_need_an_explicit_permission(client, staff, downtown):
    from docs_users.models import TrackedUser

    user = TrackedUser.objects.create(sub="auth0|x", email="reader@example.com", last_activity_at=timezone.now())
    for groups in ((SALES,), (OPERATIONS,)):
        client.force_login(staff("-".join(groups), *groups, stores=[downtown]))
        assert client.get(reverse("admin:docs_users_trackeduser_change", args=[user.pk])).status_code == 403
        assert client.get(reverse("admin:docs_users_trackeduser_changelist")).status_code == 403
    client.force_login(staff("boss", SALES, MANAGERS))
    assert client.get(reverse("admin:docs_users_trackeduser_change", args=[user.pk])).status_code == 200
