"""`manage.py load_demo`: a back office with 90 days of activity, the same for the same seed, loaded once."""

import io

import pytest
from django.apps import apps
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.urls import reverse

from chat.models import ChatMessage, ChatSession
from crm.models import AssignmentRule, Contact, RepProfile, Task, TimelineEvent
from docs_users.models import TrackedUser
from jobs.models import Job, JobAttempt
from leadgen.models import Lead
from prototypes.models import Prototype, PrototypeEvent
from sources import platforms
from sources.models import InboundLead, InboundRequest, InboundSource
from stores.models import Store
from tests.browser import ensure_staff_groups
from tracking.models import EmailLead, Mailbox

FILLED = (
    Store, Lead, EmailLead, Contact, Task, TimelineEvent, RepProfile, AssignmentRule, ChatSession, ChatMessage,
    Prototype, PrototypeEvent, InboundSource, InboundRequest, InboundLead, TrackedUser, Mailbox, Job, JobAttempt,
)  # fmt: skip


@pytest.fixture(scope="module")
def loaded(django_db_setup, django_db_blocker):
    """One office for the module, committed: each test's own changes roll back, and the tables are emptied
    when the module ends, as a transactional test leaves them."""
    with django_db_blocker.unblock():
        ensure_staff_groups()  # migrate's groups: a transactional test run before on this worker flushed them
        out = io.StringIO()
        call_command("load_demo", stdout=out)
        yield out.getvalue()
        call_command("flush", interactive=False)


@pytest.fixture
def office(loaded, db, settings):
    settings.DASHBOARD_CACHE_SECONDS = 0
    return loaded


def test_every_kind_of_row_is_there(office):
    assert "Demo office loaded in" in office and "demo / demo-password" in office
    for model in FILLED:
        assert model.objects.exists(), model.__name__
    assert {channel for channel, _ in Lead.Channel.choices} == set(Lead.objects.values_list("channel", flat=True))
    assert {"lead", "spam", "vendor"} == set(Lead.objects.values_list("status", flat=True))
    pipedrive = set(Lead.objects.values_list("pipedrive_state", flat=True))
    assert {"synced", "failed", "skipped", "not_sent"} <= pipedrive
    assert Lead.objects.filter(chat_sessions__isnull=False).exists()
    assert EmailLead.objects.filter(parse_state=Lead.ParseState.FAILED).exists()
    assert {"done", "pending", "cancelled"} == set(Task.objects.values_list("status", flat=True))


def test_staff_of_every_group_work_at_their_stores(office):
    User = get_user_model()
    for group in ("Sales", "Operations", "Managers"):
        assert User.objects.filter(groups__name=group).exclude(username="demo").exists(), group
    for store in Store.objects.filter(tracking_id__startswith="DEMO"):
        assert store.staff.filter(groups__name="Sales", rep_profile__isnull=False).exists(), store
        assert store.staff.filter(groups__name="Operations").exists(), store
    demo = User.objects.get(username="demo")
    assert demo.is_superuser and demo.check_password("demo-password")


def test_every_prototype_state_appears_with_its_events(office):
    assert set(Prototype.objects.values_list("state", flat=True)) == {state for state, _ in Prototype.State.choices}
    for prototype in Prototype.objects.exclude(state=Prototype.State.QUEUED):
        assert prototype.event_log.count() == prototype.events > 0
    completed = Prototype.objects.filter(state=Prototype.State.COMPLETED).select_related("lead").first()
    assert completed.preview_url == completed.lead.preview_url != ""
    assert completed.event_log.last().kind == PrototypeEvent.Kind.COMPLETE


def test_dead_jobs_to_replay_with_their_attempts_and_alerts(office):
    dead = Job.objects.filter(status=Job.Status.DEAD)
    assert {"leadgen.pipedrive_sync", "tracking.lead_retry"} <= set(dead.values_list("kind", flat=True))
    for job in dead:
        assert job.attempts == job.max_attempts == job.attempt_log.count()
        assert job.attempt_log.last().outcome == "failed" and job.last_error.startswith("gave up after")
        assert Job.objects.filter(kind="jobs.dead_alert", payload__job_id=job.pk, status="succeeded").exists()
    assert Job.objects.filter(status=Job.Status.SUCCEEDED).count() > 100
    # Nothing is left for the worker: no job would call an outside service on its own.
    assert not Job.objects.filter(status__in=[Job.Status.PENDING, Job.Status.RUNNING]).exists()


def test_timestamps_spread_over_the_90_days_with_a_weekday_rhythm(office):
    leads = Lead.objects.filter(store__isnull=False) | Lead.objects.filter(channel="web_form")
    times = sorted(leads.values_list("created_at", flat=True))
    assert (times[-1] - times[0]).days >= 85
    weekdays = [moment.weekday() for moment in times]
    assert weekdays.count(2) > 2 * weekdays.count(6), "a Wednesday is busier than a Sunday"
    for model in (Contact, Task, TimelineEvent, ChatSession, TrackedUser):
        field = "first_seen_at" if model is ChatSession else "created_at"
        first = model.objects.order_by(field).values_list(field, flat=True).first()
        assert first < times[len(times) // 2], f"{model.__name__} rows were all stamped recently"


def test_a_second_run_adds_and_changes_nothing(office):
    def snapshot():
        return {
            model._meta.label: sorted(map(repr, model.objects.values_list()))
            for model in (*apps.get_models(), Store.staff.through)
            if model._meta.managed and model._meta.app_label not in ("sessions", "django_celery_beat")
        }

    before = snapshot()
    out = io.StringIO()
    call_command("load_demo", stdout=out)
    assert "already loaded" in out.getvalue()
    assert snapshot() == before


def test_the_platforms_requests_read_back_as_their_leads(office):
    """The request log holds what each platform sends: the product's own readers make the same lead of it."""
    for request in InboundRequest.objects.filter(outcome="created").select_related("source", "lead"):
        kind, lead = request.source.kind, request.lead
        (submission,) = platforms.submissions(kind, body=request.body.encode(), headers=request.headers)
        if kind == "facebook":
            submission = platforms.facebook_lead_submission(request.fetched[submission.platform_id])
        fields = platforms.mapped_fields(kind, submission, request.source.field_mapping)
        assert submission.platform_id == request.platform_id
        assert (fields["first_name"], fields["email"]) == (lead.first_name, lead.email)
        assert fields.get("phone", "") == lead.phone


def test_the_dashboard_shows_a_working_office(office, client):
    client.force_login(get_user_model().objects.get(username="demo"))
    page = client.get(reverse("admin:index"), {"days": 30})
    assert page.status_code == 200
    sla = page.context["sla"]
    assert sla.due and sla.done and sla.done_within_sla and sla.overdue_now
    assert sla.done_within_sla < sla.done, "some answered late"
    assert sla.median_seconds and sla.p90_seconds > sla.median_seconds
    assert all(step.count for step, _ in page.context["funnel"])
    prototypes, chats = page.context["prototypes"], page.context["chats"]
    assert prototypes.requested and prototypes.completed and prototypes.failed and prototypes.in_progress
    assert chats.chats > chats.with_lead > 0
    reps = [rep for rep, _ in page.context["reps"] if rep.user_id is not None]
    assert sum(1 for rep in reps if rep.due) >= 5
    assert any(kind["dead"] for kind, _, _ in page.context["job_rows"])
    html = page.content.decode()
    for section in ("dashboard-sla", "dashboard-reps", "dashboard-funnel", "dashboard-prototypes-chats"):
        assert f'id="{section}"' in html


def test_every_admin_list_has_rows(office, client):
    client.force_login(get_user_model().objects.get(username="demo"))
    for model in (model for model in FILLED if admin.site.is_registered(model)):
        listing = client.get(reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist"))
        assert listing.status_code == 200, model.__name__
        assert listing.context["cl"].result_count > 0, model.__name__
    # A contact who chatted and was called back: the page shows the lead and the conversation.
    contact = Contact.objects.filter(timeline__event_type="chat.linked", tasks__status="done").first()
    page = client.get(reverse("admin:crm_contact_change", args=[contact.pk]))
    assert page.status_code == 200
    timeline = page.context["timeline"]
    assert {"lead.created", "chat.linked"} <= {entry.kind for entry in timeline}
    assert any(entry.chat is not None and entry.chat.messages.exists() for entry in timeline)


def test_the_demo_login_and_a_store_rep_have_work_queues(office, client):
    for username, view in (("demo", "mine"), ("sofia.rossi", "due_soon")):
        user = get_user_model().objects.get(username=username)
        client.force_login(user)
        queue = client.get(reverse("admin:crm_task_queue"), {"view": view})
        assert queue.status_code == 200
        assert queue.context["tasks"], f"{username} has an empty queue"
    assert {task.store.tracking_id for task in queue.context["tasks"]} == {"DEMO1"}
    assert Task.objects.filter(assigned_to=user, status="done").exists()
