from django.core.management.base import BaseCommand

from foundation.commands import add_dry_run_argument, add_since_argument, progress
from leadgen.models import Lead
from leadgen.services import lead_reclassify


class Command(BaseCommand):
    help = (
        "Classify web-form leads again (LLM, else rules). A lead that becomes a real lead gets the "
        "side effects it missed; running it twice changes nothing more."
    )

    def add_arguments(self, parser):
        add_since_argument(parser, what="Leads created")
        add_dry_run_argument(parser)

    def handle(self, *args, since, dry_run, **options):
        leads = Lead.objects.filter(channel=Lead.Channel.WEB_FORM, created_at__gte=since).order_by("pk")
        total, changed = leads.count(), 0
        for done, lead in enumerate(leads.iterator(), start=1):
            old, new = lead_reclassify(lead=lead, dry_run=dry_run)
            if old != new:
                changed += 1
                self.stdout.write(f"\nlead {lead.pk}: {old} → {new}", ending="")
            progress(self.stdout, done, total, changed=changed)
        verb = "would change" if dry_run else "changed"
        self.stdout.write(f"\n{total} leads reclassified, {changed} {verb} status.")
