"""`manage.py mark_pending --active-since DATE`: have the next daily sync deliver these users again."""

from django.core.management.base import BaseCommand

from leadgen.management.commands._backfill import since_datetime
from tracking.activity import tracked_users_mark_pending
from tracking.models import TrackedUser


class Command(BaseCommand):
    help = "Mark every tracked user with genuine activity on or after DATE (UTC) pending for the next CRM sync."

    def add_arguments(self, parser):
        parser.add_argument("--active-since", required=True, help="YYYY-MM-DD, midnight UTC.")
        parser.add_argument("--dry-run", action="store_true", help="Count, mark nothing.")

    def handle(self, *args, active_since, dry_run=False, **options):
        since = since_datetime(active_since)
        if dry_run:
            count = TrackedUser.objects.filter(last_activity_at__gte=since).count()
            self.stdout.write(f"would mark {count} users pending (dry run)")
            return
        self.stdout.write(f"marked {tracked_users_mark_pending(active_since=since)} users pending")
