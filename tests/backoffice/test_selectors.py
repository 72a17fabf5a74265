"""Every dashboard figure on known data: leads per day, the funnel, first response, delivery health, the queue."""

from datetime import UTC, date, datetime, timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from backoffice import dashboard
from chat.models import ChatSession
from crm import selectors
from crm.models import Task
from docs_users.models import TrackedUser
from jobs.breaker import CacheCircuitStorage
from jobs.models import Job
from leadgen.models import Lead
from prototypes.models import Prototype
from tests.factories import LeadFactory
from tracking.models import Mailbox
from tracking.services import LEAD_WRITE_BREAKER, POLL_KIND

pytestmark = pytest.mark.django_db

JUNE_8_TO_10 = dashboard.Period(first=date(2026, 6, 8), last=date(2026, 6, 10))


def at(day, hour=12, minute=0):
    return datetime(2026, 6, day, hour, minute, tzinfo=UTC)


def recorded(lead, when):
    Lead.objects.filter(pk=lead.pk).update(created_at=when)
    return lead


def test_leads_per_day_by_channel_and_classification_with_users_only_for_every_store(
    make_email_lead, downtown, uptown
):
    recorded(make_email_lead(downtown, process=False), at(8))
    recorded(make_email_lead(uptown, process=False, status=Lead.Status.SPAM), at(10))
    recorded(LeadFactory(email="v@vendor.example", status=Lead.Status.VENDOR), at(10, 23, 59))
    recorded(make_email_lead(downtown, process=False), at(7, 23, 59))  # the day before the period
    recorded(make_email_lead(downtown, process=False), at(11, 0, 0))  # the day after
    user = TrackedUser.objects.create(sub="auth0|1", last_activity_at=at(9))
    TrackedUser.objects.filter(pk=user.pk).update(created_at=at(9))

    every = dashboard.leads_per_day(period=JUNE_8_TO_10)
    assert every.days == [date(2026, 6, 8), date(2026, 6, 9), date(2026, 6, 10)]
    assert every.by_channel == {"web_form": [0, 0, 1], "email": [1, 0, 1], "mcp_docs": [0, 1, 0]}
    assert every.by_status == {"lead": [1, 0, 0], "spam": [0, 0, 1], "vendor": [0, 0, 1]}

    one = dashboard.leads_per_day(period=JUNE_8_TO_10, store_ids={downtown.pk})
    assert one.by_channel == {"web_form": [0, 0, 0], "email": [1, 0, 0]}  # users belong to no store
    assert one.by_status == {"lead": [1, 0, 0], "spam": [0, 0, 0], "vendor": [0, 0, 0]}


def test_funnel_counts_each_step_and_the_conversion_from_the_step_before(make_email_lead, downtown, uptown):
    contacted = make_email_lead(downtown, recorded_at=at(9), pipedrive_state=Lead.PipedriveState.SYNCED)
    # Delivered, with a completed prototype, its task still pending.
    prototyped = make_email_lead(downtown, recorded_at=at(9), pipedrive_state=Lead.PipedriveState.SYNCED)
    failed = make_email_lead(downtown, recorded_at=at(9))  # qualified, not sent; its prototype failed
    make_email_lead(downtown, recorded_at=at(9), status=Lead.Status.SPAM, process=False)
    elsewhere = make_email_lead(uptown, recorded_at=at(9), pipedrive_state=Lead.PipedriveState.SYNCED)
    make_email_lead(downtown, recorded_at=at(7), pipedrive_state=Lead.PipedriveState.SYNCED)  # before the period
    Task.objects.filter(source_lead=contacted).update(status=Task.Status.DONE, completed_at=at(10, 15))
    prototype(prototyped, Prototype.State.COMPLETED, at(9))
    prototype(failed, Prototype.State.FAILED, at(9))
    prototype(elsewhere, Prototype.State.COMPLETED, at(9))

    steps = dashboard.funnel(period=JUNE_8_TO_10, store_ids={downtown.pk})

    assert [(s.key, s.count) for s in steps] == [
        ("received", 4), ("qualified", 3), ("delivered", 2), ("prototype_completed", 1), ("contacted", 1),
    ]  # fmt: skip
    assert [None if s.conversion is None else round(s.conversion, 3) for s in steps] == [None, 0.75, 0.667, 0.5, 1]
    assert [s.of_received for s in steps] == [None, 0.75, 0.5, 0.25, 0.25]
    assert [s.count for s in dashboard.funnel(period=JUNE_8_TO_10)] == [5, 4, 3, 2, 1]


def prototype(lead, state, created_at):
    return Prototype.objects.create(lead=lead, state=state, created_at=created_at)


def chat(first_seen_at, lead=None):
    session = ChatSession.objects.create(session_id=f"s-{ChatSession.objects.count()}", lead=lead)
    ChatSession.objects.filter(pk=session.pk).update(first_seen_at=first_seen_at, last_seen_at=first_seen_at)
    return session


def test_prototypes_requested_in_the_period_by_where_they_stand(make_email_lead, downtown, uptown):
    web = [LeadFactory(email=f"w{n}@example.com") for n in range(5)]
    for lead, state in zip(web, ("completed", "completed", "failed", "generating", "queued"), strict=True):
        prototype(lead, state, at(9))
    prototype(LeadFactory(email="old@example.com"), "completed", at(7, 23, 59))  # before the period
    prototype(make_email_lead(downtown), "failed", at(10))
    prototype(make_email_lead(uptown), "completed", at(10))

    every = dashboard.prototypes(period=JUNE_8_TO_10)
    assert (every.requested, every.completed, every.failed, every.in_progress) == (7, 3, 2, 2)
    assert every.share_completed == 0.6  # completed among the ended ones: 3 of 5
    one = dashboard.prototypes(period=JUNE_8_TO_10, store_ids={downtown.pk})
    assert (one.requested, one.completed, one.failed, one.in_progress, one.share_completed) == (1, 0, 1, 0, 0)
    none = dashboard.prototypes(period=JUNE_8_TO_10, store_ids=set())
    assert (none.requested, none.share_completed) == (0, None)


def test_chats_started_in_the_period_and_those_that_produced_a_lead(make_email_lead, downtown, uptown):
    chat(at(8, 9), lead=LeadFactory(email="chat@example.com"))
    chat(at(9, 10))
    chat(at(10, 23, 59))
    chat(at(7, 23, 59), lead=LeadFactory(email="early@example.com"))  # before the period
    chat(at(11, 0, 0))  # after it
    chat(at(10), lead=make_email_lead(downtown))

    every = dashboard.chats(period=JUNE_8_TO_10)
    assert (every.chats, every.with_lead, every.share_with_lead) == (4, 2, 0.5)
    one = dashboard.chats(period=JUNE_8_TO_10, store_ids={downtown.pk})  # a store's: those of its leads
    assert (one.chats, one.with_lead) == (1, 1)
    assert dashboard.chats(period=JUNE_8_TO_10, store_ids={uptown.pk}).share_with_lead is None


def test_first_response_due_done_within_sla_median_p90_and_overdue_now(make_email_lead, downtown, uptown):
    # Four leads arrive on June 10; the SLA is 5 minutes, so each task is due 5 minutes after its lead.
    leads = [make_email_lead(downtown, received_at=at(10, hour)) for hour in (10, 11, 12, 13)]
    make_email_lead(uptown, received_at=at(10, 9))  # another store's, pending and overdue
    for lead, minutes in zip(leads, (3, 10, 20), strict=False):
        Task.objects.filter(source_lead=lead).update(
            status=Task.Status.DONE, completed_at=lead.received_at + timedelta(minutes=minutes)
        )
    june_10 = dashboard.Period(first=date(2026, 6, 10), last=date(2026, 6, 10))

    sla = dashboard.first_response(period=june_10, store_ids={downtown.pk}, now=at(11))

    assert (sla.due, sla.done, sla.done_within_sla, sla.overdue_now) == (4, 3, 1, 1)
    assert sla.share_within_sla == 0.25
    # Arrival → done: 180 s, 600 s, 1200 s. Linear interpolation: p90 = 600 + 0.8 × 600.
    assert (sla.median_seconds, sla.p90_seconds) == (600, 1080)
    every = dashboard.first_response(period=june_10, now=at(11))
    assert (every.due, every.done, every.overdue_now) == (5, 3, 2)
    # A task staff created is measured from its creation: 20 minutes here, and it counts beside the leads'.
    contact = Task.objects.get(source_lead=leads[3]).contact
    staff_task = Task.objects.create(
        contact=contact, store=downtown, task_type=Task.TaskType.LEAD_OUTREACH, type_category="lead_outreach",
        due_at=at(10, 16), arrived_at=at(10, 15), status=Task.Status.DONE, completed_at=at(10, 15, 20),
    )  # fmt: skip
    with_staff = dashboard.first_response(period=june_10, store_ids={downtown.pk}, now=at(11))
    assert (with_staff.due, with_staff.done, with_staff.done_within_sla) == (5, 4, 2)
    assert (with_staff.median_seconds, with_staff.p90_seconds) == (900, 1200)  # 180, 600, 1200, 1200 s
    assert staff_task.lead_recorded_at is None
    nothing = dashboard.first_response(period=JUNE_8_TO_10, store_ids=set(), now=at(11))
    assert (nothing.due, nothing.share_within_sla, nothing.median_seconds) == (0, None, None)


def test_delivery_health_jobs_by_kind_breakers_last_poll_and_beat_runs():
    def job(kind, status, attempts=0, key=None):
        key = key or f"{kind}:{Job.objects.count()}"
        return Job.objects.create(kind=kind, key=key, status=status, attempts=attempts)

    job("crm.lead_created", "pending")
    job("crm.lead_created", "pending", attempts=2)
    job("crm.lead_created", "dead", attempts=3)
    job("crm.lead_created", "succeeded", attempts=1)
    job("leadgen.pipedrive_sync", "running", attempts=1)
    job("leadgen.pipedrive_sync", "succeeded", attempts=1)
    Mailbox.objects.create(name="sales", host="imap.example.com", username="u", password_env_var="IMAP_PW_SALES")
    job(POLL_KIND, "succeeded", key=f"{POLL_KIND}:sales:20260610T120000")
    newest = job(POLL_KIND, "dead", key=f"{POLL_KIND}:sales:20260610T120500")
    CacheCircuitStorage(LEAD_WRITE_BREAKER).state = "open"
    call_command("sync_schedules", verbosity=0)
    PeriodicTask.objects.filter(name="jobs: sweep due and abandoned jobs").update(last_run_at=at(10))

    health = dashboard.delivery_health()

    by_kind = {row["kind"]: row for row in health.jobs_by_kind}
    assert by_kind["crm.lead_created"] == {
        "kind": "crm.lead_created", "pending": 2, "retrying": 1, "running": 0, "dead": 1,
    }  # fmt: skip
    assert by_kind["leadgen.pipedrive_sync"] == {
        "kind": "leadgen.pipedrive_sync", "pending": 0, "retrying": 0, "running": 1, "dead": 0,
    }  # fmt: skip
    assert health.breakers[LEAD_WRITE_BREAKER]["state"] == "open"
    assert health.mailbox_polls == [{"mailbox": "sales", "status": "dead", "at": newest.created_at}]
    beats = {beat.name: beat for beat in health.beats}
    assert beats["jobs: sweep due and abandoned jobs"].last_run_at == at(10)
    assert beats["tracking: poll lead mailboxes"].last_run_at is None
    CacheCircuitStorage(LEAD_WRITE_BREAKER).state = "closed"


def test_work_queue_mine_and_due_soon(make_email_lead, downtown, uptown, staff):
    now = timezone.now()
    ana = staff("ana", stores=[downtown])
    bob = staff("bob")
    overdue = Task.objects.get(source_lead=make_email_lead(downtown, received_at=now - timedelta(hours=1)))
    later = Task.objects.get(source_lead=make_email_lead(downtown, received_at=now + timedelta(hours=30)))
    for_bob = Task.objects.get(source_lead=make_email_lead(downtown, received_at=now))
    Task.objects.filter(pk=for_bob.pk).update(assigned_to=bob)
    elsewhere = Task.objects.get(source_lead=make_email_lead(uptown, received_at=now))

    assert list(selectors.tasks_mine(user=ana, store_ids={downtown.pk})) == [overdue, later]
    assert list(selectors.tasks_mine(user=bob, store_ids=None)) == [for_bob]
    assert list(selectors.tasks_due_soon(store_ids={downtown.pk}, now=now)) == [overdue, for_bob]
    assert list(selectors.tasks_due_soon(store_ids=None, now=now)) == [overdue, for_bob, elsewhere]


def test_the_dashboard_computes_its_figures_once_per_cache_period(make_email_lead, downtown, settings):
    settings.DASHBOARD_CACHE_SECONDS = 60
    period = dashboard.Period.last_days(7)
    ids = {downtown.pk, -1}  # a store set no other test uses: the cache is shared
    first = dashboard.figures(period=period, store_ids=ids, sections={"leads"})
    make_email_lead(downtown, received_at=timezone.now())
    again = dashboard.figures(period=period, store_ids=ids, sections={"leads"})
    assert again["computed_at"] == first["computed_at"] and again["funnel"][0].count == first["funnel"][0].count
    settings.DASHBOARD_CACHE_SECONDS = 0
    fresh = dashboard.figures(period=period, store_ids=ids, sections={"leads"})
    assert fresh["funnel"][0].count == first["funnel"][0].count + 1
