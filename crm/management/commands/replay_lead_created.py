from django.core.management.base import BaseCommand

from crm.services import lead_created_replay
from foundation.commands import add_since_argument


class Command(BaseCommand):
    help = (
        "Emit LeadCreated again for every complete email lead received since DATE. The lead processor is "
        "idempotent: it fills in missing contacts, tasks and timeline events and changes nothing else."
    )

    def add_arguments(self, parser):
        add_since_argument(parser, what="Email leads received")

    def handle(self, *args, since, **options):
        count = lead_created_replay(since=since, actor="manage.py replay_lead_created")
        self.stdout.write(f"Enqueued {count} LeadCreated job(s).")
