from datetime import UTC, datetime, time

from django.core.management.base import BaseCommand, CommandError
from django.utils.dateparse import parse_date

from prototypes.services import prototypes_recover


class Command(BaseCommand):
    help = "Schedule a check for every unfinished prototype created since --since whose checks stopped."

    def add_arguments(self, parser):
        parser.add_argument("--since", required=True, help="YYYY-MM-DD: prototypes created on or after this day (UTC).")
        parser.add_argument("--dry-run", action="store_true", help="Show what would be rescheduled; change nothing.")

    def handle(self, *args, since, dry_run, **options):
        day = parse_date(since)
        if day is None:
            raise CommandError(f"--since must be a date as YYYY-MM-DD, not {since!r}")

        def progress(done, total, counts):
            self.stdout.write(f"\r{done}/{total} prototypes: rescheduled {counts['rescheduled']}", ending="")
            self.stdout.flush()

        since_start = datetime.combine(day, time.min, tzinfo=UTC)
        counts = prototypes_recover(since=since_start, dry_run=dry_run, progress=progress)
        if counts["found"]:
            self.stdout.write("")
        if dry_run:
            self.stdout.write(f"{counts['found']} stuck prototype(s) found; would reschedule {counts['found']}.")
        else:
            self.stdout.write(f"{counts['found']} stuck prototype(s) found; rescheduled {counts['rescheduled']}.")
