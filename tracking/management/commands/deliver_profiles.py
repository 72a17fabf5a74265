"""`manage.py deliver_profiles --sub SUB | --all-pending [--dry-run]`: queue profile deliveries now."""

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from tracking.models import TrackedUser
from tracking.sync import profile_delivery_enqueue

PROGRESS_EVERY = 1000


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
        for done, user_id in enumerate(ids, start=1):
            with transaction.atomic():
                TrackedUser.objects.filter(pk=user_id).update(pending_since=None)
                profile_delivery_enqueue(user_id=user_id)
            if done % PROGRESS_EVERY == 0:
                self.stdout.write(f"queued {done}/{len(ids)}")
        self.stdout.write(f"queued {len(ids)} deliveries")
