"""`manage.py replay_lead_created --since DATE`: LeadCreated again for recent complete email leads."""

from datetime import UTC, datetime

import pytest
from django.core.management import CommandError, call_command

from crm.intake import LEAD_CREATED
from crm.models import Contact, Task, TimelineEvent
from crm.services import lead_created_process
from jobs.models import Job
from tests.tracking.support import run_jobs

pytestmark = pytest.mark.django_db


def test_replay_emits_again_for_leads_since_the_date_and_fills_only_what_is_missing(make_lead, capsys):
    old = make_lead(phone="+14155550101", received_at=datetime(2026, 3, 1, 12, tzinfo=UTC))
    processed = make_lead(phone="+14155550102", received_at=datetime(2026, 3, 20, 12, tzinfo=UTC))
    never_processed = make_lead(phone="+14155550103", received_at=datetime(2026, 3, 21, 12, tzinfo=UTC))
    make_lead(phone="", received_at=datetime(2026, 3, 21, 13, tzinfo=UTC))  # incomplete: no event
    lead_created_process(lead_id=processed.pk)
    task = Task.objects.get()

    call_command("replay_lead_created", "--since", "2026-03-10")

    assert "Enqueued 2 LeadCreated job(s)." in capsys.readouterr().out
    replays = Job.objects.filter(kind=LEAD_CREATED)
    assert sorted(job.payload["lead_id"] for job in replays) == [processed.pk, never_processed.pk]
    assert all(job.key.startswith(f"{LEAD_CREATED}:{job.payload['lead_id']}:replay:") for job in replays)
    assert run_jobs(LEAD_CREATED) == 2
    assert set(Contact.objects.values_list("phone", flat=True)) == {"+14155550102", "+14155550103"}
    assert Task.objects.get(source_lead=processed) == task, "the processed lead's task is untouched"
    assert TimelineEvent.objects.count() == 2
    assert not Contact.objects.filter(phone=old.phone).exists()

    call_command("replay_lead_created", "--since", "2026-03-10T00:00:00+00:00")
    assert Job.objects.filter(kind=LEAD_CREATED).count() == 4, "every run is a new replay"
    run_jobs(LEAD_CREATED)
    assert (Contact.objects.count(), Task.objects.count(), TimelineEvent.objects.count()) == (2, 2, 2)


def test_replay_needs_a_date():
    with pytest.raises(CommandError, match="not a date"):
        call_command("replay_lead_created", "--since", "last week")
