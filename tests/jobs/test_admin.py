"""Staff work with jobs in the admin: groups, list, replay/discard, export, test ping — on PostgreSQL."""

from html.parser import HTMLParser

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.urls import reverse
from pytest_django.asserts import assertContains, assertRedirects, assertTemplateUsed

import jobs
from foundation.staff_groups import MANAGERS, OPERATIONS, SALES
from jobs import runtime
from jobs.models import Job

pytestmark = pytest.mark.django_db

PASSWORD = "a long test password"
CHANGELIST = "admin:jobs_job_changelist"
GROUP_APPS = {"jobs", "django_celery_beat", "tracking", "docs_users", "leadgen", "stores", "blog"}
BEAT_MODELS = ["periodictask", "intervalschedule", "crontabschedule", "solarschedule", "clockedschedule"]


@pytest.fixture
def make_user(django_user_model):
    def make(username, *group_names, is_staff=True):
        user = django_user_model.objects.create_user(username, password=PASSWORD, is_staff=is_staff)
        user.groups.add(*[Group.objects.get(name=name) for name in group_names])
        return user

    return make


@pytest.fixture
def ops_client(client, make_user):
    client.force_login(make_user("ops", OPERATIONS, MANAGERS))
    return client


@pytest.fixture
def sales_client(client, make_user):
    client.force_login(make_user("sales", SALES))
    return client


def dead_job(key, payload=None) -> Job:
    job = jobs.enqueue("tests.permanent", payload or {}, key=key)
    runtime.job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == Job.Status.DEAD
    return job


def pending_job(key) -> Job:
    return jobs.enqueue("tests.record", {}, key=key)


def listed(response) -> list[Job]:
    return list(response.context["cl"].result_list)


class _FormReader(HTMLParser):
    """The fields a browser would submit with each form of a page (submit buttons aside)."""

    def __init__(self):
        super().__init__()
        self.forms, self._current = [], None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "form":
            self._current = {}
            self.forms.append(self._current)
        elif tag == "input" and self._current is not None and attrs.get("name"):
            kind = attrs.get("type", "text")
            if kind == "submit" or (kind in ("checkbox", "radio") and "checked" not in attrs):
                return
            self._current.setdefault(attrs["name"], []).append(attrs.get("value") or "")

    def handle_endtag(self, tag):
        if tag == "form":
            self._current = None


def confirmation_form(response) -> dict[str, list[str]]:
    reader = _FormReader()
    reader.feed(response.content.decode())
    [form] = [form for form in reader.forms if "confirmed" in form]
    return form


# --- groups ------------------------------------------------------------------------------


def group_perms(name) -> set[str]:
    permissions = Group.objects.get(name=name).permissions.select_related("content_type")
    return {f"{p.content_type.app_label}.{p.codename}" for p in permissions if p.content_type.app_label in GROUP_APPS}


def test_migrate_creates_the_operations_group():
    expected = {"jobs.view_job", "jobs.change_job", "jobs.view_jobattempt"}
    expected |= {f"django_celery_beat.{a}_{m}" for m in BEAT_MODELS for a in ("view", "add", "change", "delete")}
    expected |= {"stores.view_store", "stores.add_store", "stores.change_store", "tracking.view_emaillead"}
    expected |= {f"tracking.{a}_mailbox" for a in ("view", "add", "change", "delete")}
    expected |= {"docs_users.deliver_trackeduser"}
    expected |= {"blog.view_blogcache", "blog.purge_blogcache"}
    assert group_perms(OPERATIONS) == expected


def test_migrate_creates_the_managers_group():
    assert group_perms(MANAGERS) == {"stores.view_store", "stores.view_all_stores", "docs_users.view_trackeduser"}


def test_migrate_creates_the_sales_group_without_job_access(make_user):
    assert group_perms(SALES) == {
        "leadgen.view_lead", "leadgen.add_lead", "leadgen.change_lead", "stores.view_store",
        "tracking.view_emaillead",
    }  # fmt: skip
    sales = make_user("sales", SALES)
    assert not sales.has_module_perms("jobs")
    assert not sales.has_perm("leadgen.delete_lead"), "leads are never deleted by staff"


# --- list and change page ----------------------------------------------------------------


def test_operations_sees_the_job_list_with_filters(ops_client):
    dead = dead_job("order:7:confirmation")
    pending = pending_job("order:8:confirmation")
    response = ops_client.get(reverse(CHANGELIST))
    assert response.status_code == 200
    specs = {spec.title: spec for spec in response.context["cl"].filter_specs}
    assert {"status", "kind", "created at"} <= specs.keys()
    for title in ("status", "kind", "created at"):
        assertContains(response, f'data-filter-title="{title}"')
    assertContains(response, 'id="send-test-job"')
    assertContains(response, 'class="export_link"')
    assert {dead, pending} <= set(listed(response))

    assert listed(ops_client.get(reverse(CHANGELIST), {"status__exact": "dead"})) == [dead]
    assert listed(ops_client.get(reverse(CHANGELIST), {"kind": "tests.record"})) == [pending]

    Job.objects.filter(pk=pending.pk).update(created_at=pending.created_at.replace(year=2020))
    cl = ops_client.get(reverse(CHANGELIST)).context["cl"]
    choices = {c["display"]: c["query_string"] for c in specs["created at"].choices(cl)}
    recent = listed(ops_client.get(reverse(CHANGELIST) + choices["Past 7 days"]))
    assert dead in recent and pending not in recent


def test_operations_searches_jobs_by_key_and_id(ops_client):
    wanted = dead_job("order:7:confirmation")
    dead_job("order:70:confirmation")
    assert listed(ops_client.get(reverse(CHANGELIST), {"q": "order:7:confirmation"})) == [wanted]
    assert wanted in listed(ops_client.get(reverse(CHANGELIST), {"q": str(wanted.pk)}))  # keys may hold the digits


def test_job_change_page_shows_attempts_and_payload(ops_client):
    job = dead_job("order:9:confirmation", {"order_id": 9, "to": "buyer@example.com"})
    response = ops_client.get(reverse("admin:jobs_job_change", args=[job.pk]))
    assert response.status_code == 200
    [attempts] = response.context["inline_admin_formsets"]
    assert [form.original.outcome for form in attempts] == ["failed"]
    assertContains(response, "upstream said 400: bad request")
    assertContains(
        response, "<pre>{\n  &quot;order_id&quot;: 9,\n  &quot;to&quot;: &quot;buyer@example.com&quot;\n}</pre>"
    )


# --- replay and discard ------------------------------------------------------------------


def test_replay_asks_for_confirmation_then_replays(ops_client):
    dead = dead_job("order:10:confirmation")
    pending = pending_job("order:11:confirmation")
    response = ops_client.post(
        reverse(CHANGELIST), {"action": "replay", "index": "0", "_selected_action": [dead.pk, pending.pk]}
    )
    assert response.status_code == 200
    assertTemplateUsed(response, "admin/jobs/job/confirm_action.html")
    assertContains(response, f"#{dead.pk} tests.permanent [order:10:confirmation]")
    assertContains(response, 'value="Yes, I\'m sure"')
    assertContains(response, 'name="csrfmiddlewaretoken"')
    dead.refresh_from_db()
    assert dead.status == Job.Status.DEAD, "nothing happens before the confirmation"

    form = confirmation_form(response)
    assert sorted(form["_selected_action"]) == sorted([str(dead.pk), str(pending.pk)])
    response = ops_client.post(reverse(CHANGELIST), form, follow=True)
    assertContains(response, "Replayed 1 job(s).")  # the pending one is not replayable
    dead.refresh_from_db()
    assert dead.status == Job.Status.PENDING and dead.last_error == "replayed by ops"


def test_discard_asks_for_confirmation_then_discards(ops_client):
    job = pending_job("order:12:confirmation")
    response = ops_client.post(reverse(CHANGELIST), {"action": "discard", "index": "0", "_selected_action": [job.pk]})
    assert response.status_code == 200
    assertContains(response, "Discard jobs?")
    assertContains(response, 'value="Yes, I\'m sure"')
    job.refresh_from_db()
    assert job.status == Job.Status.PENDING

    response = ops_client.post(reverse(CHANGELIST), confirmation_form(response), follow=True)
    assertContains(response, "Discarded 1 job(s).")
    job.refresh_from_db()
    assert job.status == Job.Status.SKIPPED and job.last_error == "discarded by ops"


# --- who may do what -----------------------------------------------------------------------


def test_sales_cannot_see_or_replay_jobs(sales_client):
    job = dead_job("order:13:confirmation")
    assert sales_client.get(reverse(CHANGELIST)).status_code == 403
    # Outside their scope too: the same 404 as an id never used.
    assert sales_client.get(reverse("admin:jobs_job_change", args=[job.pk])).status_code == 404
    response = sales_client.post(
        reverse(CHANGELIST), {"action": "replay", "_selected_action": [job.pk], "confirmed": "yes"}
    )
    assert response.status_code == 403
    sales_client.post(reverse("admin:jobs_job_send_test"))
    job.refresh_from_db()
    assert job.status == Job.Status.DEAD
    assert not Job.objects.filter(kind="jobs.ping").exists()


def test_sales_cannot_export_jobs(sales_client):
    dead_job("order:14:confirmation")
    assert sales_client.get(reverse("admin:jobs_job_export")).status_code == 403
    response = sales_client.post(
        reverse("admin:jobs_job_export"), {"format": "0", "resource": "0", "jobresource_key": "on"}
    )
    assert response.status_code == 403


def test_non_staff_and_anonymous_are_sent_to_login(client, make_user):
    job = dead_job("order:15:confirmation")
    url = reverse(CHANGELIST)
    assertRedirects(client.get(url), f"{reverse('admin:login')}?next={url}")
    client.force_login(make_user("customer", OPERATIONS, is_staff=False))
    assertRedirects(client.get(url), f"{reverse('admin:login')}?next={url}")
    response = client.post(url, {"action": "replay", "_selected_action": [job.pk], "confirmed": "yes"})
    assert response.status_code == 302 and response.url.startswith(reverse("admin:login"))
    job.refresh_from_db()
    assert job.status == Job.Status.DEAD


def test_admin_rejects_a_replay_without_csrf_token(make_user):
    job = dead_job("order:16:confirmation")
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(make_user("ops", OPERATIONS, MANAGERS))
    confirmed = {"action": "replay", "_selected_action": [job.pk], "confirmed": "yes"}

    assert browser.post(reverse(CHANGELIST), confirmed).status_code == 403
    job.refresh_from_db()
    assert job.status == Job.Status.DEAD

    browser.get(reverse(CHANGELIST))  # sets the CSRF cookie, as a page view does
    token = browser.cookies["csrftoken"].value
    assert browser.post(reverse(CHANGELIST), {**confirmed, "csrfmiddlewaretoken": token}).status_code == 302
    job.refresh_from_db()
    assert job.status == Job.Status.PENDING


# --- export and test ping --------------------------------------------------------------------


def test_operations_exports_jobs_as_csv(ops_client):
    dead = dead_job("order:17:confirmation")
    url = reverse("admin:jobs_job_export")
    form = ops_client.get(url).context["form"]
    assert [label for _, label in form.fields["format"].choices] == ["csv"]
    # What the page submits: the only format, the only resource, every field box ticked.
    data = {"format": "0", "resource": "0"}
    data |= {name: "on" for name, field in form.fields.items() if getattr(field, "is_selectable_field", False)}

    response = ops_client.post(url + "?status__exact=dead", data)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert "attachment" in response["Content-Disposition"]
    rows = response.content.decode("utf-8-sig").splitlines()
    assert rows[0] == "id,kind,key,store,status,attempts,max_attempts,run_after,last_error,created_at,finished_at"
    assert len(rows) == 2, "the changelist filter applies: the pending dead-letter alert is left out"
    assert rows[1].startswith(f"{dead.pk},tests.permanent,order:17:confirmation,,dead,1,")


def test_send_test_job_creates_a_ping_and_opens_it(ops_client):
    response = ops_client.post(reverse("admin:jobs_job_send_test"), follow=True)
    ping = Job.objects.get(kind="jobs.ping")
    assert response.redirect_chain == [(reverse("admin:jobs_job_change", args=[ping.pk]), 302)]
    assert ping.status == Job.Status.PENDING and ping.payload == {"sent_by": "ops"}
    assertContains(response, f"Test job #{ping.pk} sent")


def test_send_test_job_ignores_get(ops_client):
    assertRedirects(ops_client.get(reverse("admin:jobs_job_send_test")), reverse(CHANGELIST))
    assert not Job.objects.filter(kind="jobs.ping").exists()
