from django.core.management.base import BaseCommand

from foundation.commands import add_dry_run_argument, add_since_argument, progress
from leadgen.models import Lead
from leadgen.services import lead_resync_pipedrive


class Command(BaseCommand):
    help = "Queue Pipedrive sync again for leads that are not synced (failed, pending, skipped). Synced ones are left."

    def add_arguments(self, parser):
        add_since_argument(parser, what="Leads created")
        add_dry_run_argument(parser)

    def handle(self, *args, since, dry_run, **options):
        leads = (
            Lead.objects.filter(status=Lead.Status.LEAD, created_at__gte=since)
            .exclude(pipedrive_state=Lead.PipedriveState.SYNCED)
            .order_by("pk")
        )
        total, queued = leads.count(), 0
        for done, lead in enumerate(leads.iterator(), start=1):
            queued += dry_run or lead_resync_pipedrive(lead=lead, actor="resync_pipedrive")
            progress(self.stdout, done, total, queued=queued)
        verb = "would be queued" if dry_run else "queued"
        self.stdout.write(f"\n{queued} of {total} unsynced leads {verb} for Pipedrive.")
