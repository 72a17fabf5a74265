"""Concurrent LeadCreated processing on PostgreSQL: threads, each with its own connection, released together."""

import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from crm.models import Contact, Task, TimelineEvent
from crm.services import lead_created_process

pytestmark = pytest.mark.django_db(transaction=True)

NOON = datetime(2026, 6, 10, 16, 0, tzinfo=UTC)


def run_together(lead_ids: list[int]) -> list[Exception]:
    barrier, errors = threading.Barrier(len(lead_ids)), []

    def process(lead_id):
        try:
            barrier.wait()
            lead_created_process(lead_id=lead_id)
        except Exception as exc:  # collected for the caller's assertion
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=process, args=(lead_id,)) for lead_id in lead_ids]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def test_the_same_event_processed_by_eight_workers_at_once_writes_once(make_lead):
    lead = make_lead(received_at=NOON)
    assert run_together([lead.pk] * 8) == []
    assert (Contact.objects.count(), Task.objects.count(), TimelineEvent.objects.count()) == (1, 1, 1)


def test_different_leads_of_one_contact_at_once_share_the_contact_and_its_one_pending_task(make_lead):
    leads = [make_lead(received_at=NOON + timedelta(minutes=n), first_name="", last_name="") for n in range(6)]
    leads[3].first_name = "Ada"
    leads[3].save()
    assert run_together([lead.pk for lead in leads] * 2) == []
    contact = Contact.objects.get()
    assert contact.last_activity_at == NOON + timedelta(minutes=5), "the latest arrival wins, whatever the order"
    assert contact.first_name == "Ada"
    assert Task.objects.filter(status="pending").count() == 1
    assert TimelineEvent.objects.count() == 6
