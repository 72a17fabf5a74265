"""The demo office is a function of its seed and the time: loaded twice at the same moment, it is the same."""

from datetime import UTC, datetime

from django.db import transaction

from crm.models import Task
from demo.office import office_load
from demo.staff import staff_load
from leadgen.models import Lead


def test_the_same_seed_and_time_make_the_same_office(db):
    now = datetime(2026, 6, 17, 15, 30, tzinfo=UTC)

    class RolledBack(Exception):
        pass

    def office_at(now):
        try:
            with transaction.atomic():
                office_load(staff_load(), now=now)
                leads = list(Lead.objects.order_by("created_at", "email").values_list(
                    "created_at", "channel", "first_name", "last_name", "email", "phone", "status", "pipedrive_state"
                ))  # fmt: skip
                tasks = list(Task.objects.order_by("created_at").values_list("due_at", "status", "completed_at"))
                raise RolledBack((leads, tasks))
        except RolledBack as rolled_back:
            return rolled_back.args[0]

    assert office_at(now) == office_at(now)
