import time

from django.core.management.base import BaseCommand
from django.db import transaction
from django.utils import timezone

from demo.office import DAYS, office_exists, office_load
from demo.staff import DEMO_PASSWORD, DEMO_USERNAME, staff_load


class Command(BaseCommand):
    help = (
        f"Load the demo office of `make run`: three stores with their staff, and {DAYS} days of leads, contacts, "
        "tasks, chats, prototypes, docs users and jobs. Safe to rerun: an office already loaded is left as it is."
    )

    def handle(self, *args, **options):
        started = time.monotonic()
        with transaction.atomic():
            staff = staff_load()
            counts = None if office_exists(staff) else office_load(staff, now=timezone.now())
        if counts is None:
            self.stdout.write("Demo office already loaded: nothing added.")
        else:
            summary = ", ".join(f"{count} {name}" for name, count in counts.items())
            self.stdout.write(f"Demo office loaded in {time.monotonic() - started:.1f} s: {summary}.")
        self.stdout.write(f"Demo login: {DEMO_USERNAME} / {DEMO_PASSWORD}")
