"""Each task carries its lead's arrival and recording time: written by the lead processor, backfilled by the
migration for the tasks that existed before, the creation time for a task staff create."""

import importlib
from datetime import UTC, datetime

import pytest
from django.apps import apps
from django.utils import timezone

from crm import services
from crm.models import Task

pytestmark = pytest.mark.django_db

backfill = importlib.import_module("crm.migrations.0007_task_lead_times_backfill")

RECEIVED = datetime(2026, 6, 10, 14, 0, tzinfo=UTC)
RECORDED = datetime(2026, 6, 10, 14, 3, tzinfo=UTC)


def test_the_processor_copies_the_leads_arrival_and_recording_time(make_email_lead, downtown):
    received = make_email_lead(downtown, received_at=RECEIVED, recorded_at=RECORDED)
    task = Task.objects.get(source_lead=received)
    assert (task.arrived_at, task.lead_recorded_at) == (RECEIVED, RECORDED)


def test_the_backfill_gives_existing_tasks_their_leads_times(make_email_lead, downtown):
    received = make_email_lead(downtown, received_at=RECEIVED, recorded_at=RECORDED)
    # A lead without a received time arrived when it was recorded.
    unreceived = make_email_lead(downtown, recorded_at=RECORDED, process=False)
    type(unreceived).objects.filter(pk=unreceived.pk).update(received_at=None)
    services.lead_created_process(lead_id=unreceived.pk)
    contact = Task.objects.get(source_lead=received).contact
    by_staff = services.task_save(
        task=Task(contact=contact, type_category="lead_outreach", status="done", due_at=RECEIVED), actor="ana"
    )
    later = timezone.now()
    Task.objects.update(arrived_at=later, lead_recorded_at=None)  # as the columns were when added

    backfill.copy_lead_times(apps, None)

    times = {t.source_lead_id: (t.arrived_at, t.lead_recorded_at) for t in Task.objects.all()}
    assert times[received.pk] == (RECEIVED, RECORDED)
    assert times[unreceived.pk] == (RECORDED, RECORDED)
    by_staff.refresh_from_db()
    assert (by_staff.arrived_at, by_staff.lead_recorded_at) == (by_staff.created_at, None)
