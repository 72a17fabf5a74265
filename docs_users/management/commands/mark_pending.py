"""`manage.py mark_pending --active-since DATE`: have the next daily sync deliver these users again."""

from django.core.management.base import BaseCommand

from docs_users.activity import tracked_users_mark_pending
from docs_users.models import TrackedUser
from foundation.commands import add_dry_run_argument, add_since_argument


class Command(BaseCommand):
    help = "Mark every tracked user with genuine activity on or after DATE (UTC) pending for the next CRM sync."

    def add_arguments(self, parser):
        add_since_argument(parser, what="Users active", name="--active-since")
        add_dry_run_argument(parser)

    def handle(self, *args, since, dry_run=False, **options):
        if dry_run:
            count = TrackedUser.objects.filter(last_activity_at__gte=since).count()
            self.stdout.write(f"would mark {count} users pending (dry run)")
            return
        self.stdout.write(f"marked {tracked_users_mark_pending(active_since=since)} users pending")
