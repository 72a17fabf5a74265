"""`manage.py subject_export --email … | --phone … [--output FILE]`: everything held about a person, as JSON."""

import json

from django.core.management.base import BaseCommand
from django.core.serializers.json import DjangoJSONEncoder

from privacy.management.subject import actor_from, add_subject_arguments, subject_from
from privacy.services import subject_export


class Command(BaseCommand):
    help = (
        "Write one JSON document of every row held about a person (found by email and/or phone) in every app, "
        "and what outside services hold about them. The request is audited (who, when, rows per table)."
    )

    def add_arguments(self, parser):
        add_subject_arguments(parser)
        parser.add_argument("--output", default="-", help="File to write (default: standard output).")

    def handle(self, *args, **options):
        document, request = subject_export(subject=subject_from(options), actor=actor_from(options))
        text = json.dumps(document, cls=DjangoJSONEncoder, ensure_ascii=False, indent=2)
        if options["output"] == "-":
            self.stdout.write(text)
        else:
            with open(options["output"], "w", encoding="utf-8") as output:
                output.write(text + "\n")
        found = sum(request.rows.values())
        self.stderr.write(f"Exported {found} row(s) of {len(request.rows)} table(s): subject request #{request.pk}.")
