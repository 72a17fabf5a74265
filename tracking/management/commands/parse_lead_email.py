import json
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from tracking.parsing import parse_lead_email


class Command(BaseCommand):
    help = (
        "Print what the lead-email parser reads from .eml files, as JSON: for operators checking a new "
        "notification format. Reads files only; writes nothing."
    )

    def add_arguments(self, parser):
        parser.add_argument("files", nargs="+", type=Path, metavar="FILE")

    def handle(self, *args, files, **options):
        results = []
        for path in files:
            try:
                raw = path.read_bytes()
            except OSError as exc:
                raise CommandError(f"{path}: {exc.strerror}") from exc
            parsed = parse_lead_email(raw, default_region=settings.PHONE_DEFAULT_REGION)
            results.append({"file": str(path), **parsed.to_json(), "dedup_key": parsed.dedup_key})
        self.stdout.write(json.dumps(results, indent=2, ensure_ascii=False))
