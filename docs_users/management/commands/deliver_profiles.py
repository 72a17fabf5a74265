"""`manage.py deliver_profiles --sub SUB | --all-pending [--dry-run]`: queue profile deliveries now."""

from django.core.management.base import BaseCommand, CommandError

from docs_users.models import TrackedUser
from docs_users.sync import profile_deliveries_queue

BATCH = 1000  # users per transaction, and per progress line


class Command(BaseCommand):
    help = (
        "Queue a CRM profile delivery for one user or every pending user, and clear their pending marker. "
        "Run again, it queues new deliveries: the CRM upserts by sub."
    )

    def add_arguments(self, parser):
        who = parser.add_mutually_exclusive_group(required=True)
        who.add_argument("--sub", help="The identity provider's subject of one user.")
        who.add_argument("--all-pending", action="store_true", help="Every user marked pending.")
        parser.add_argument("--dry-run", action="store_true", help="Count, queue nothing.")

    def handle(self, *args, sub=None, all_pending=False, dry_run=False, **options):
        users = TrackedUser.objects.filter(sub=sub) if sub else TrackedUser.objects.filter(pending_since__isnull=False)
        ids = list(users.order_by("id").values_list("id", flat=True))
        if sub and not ids:
            raise CommandError(f"no tracked user with sub {sub!r}")
        if dry_run:
            self.stdout.write(f"would queue {len(ids)} deliveries (dry run)")
            return
        for start in range(0, len(ids), BATCH):
            profile_deliveries_queue(user_ids=ids[start : start + BATCH])
            self.stdout.write(f"queued {min(start + BATCH, len(ids))}/{len(ids)}")
        self.stdout.write(f"queued {len(ids)} deliveries")
