"""`manage.py subject_erase --email … | --phone …`: delete or anonymize everything held about a person."""

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from privacy.management.subject import actor_from, add_subject_arguments, subject_from
from privacy.selectors import subject_find
from privacy.services import subject_erase


class Command(BaseCommand):
    help = (
        "Delete or anonymize every row about a person (found by email and/or phone) in every app, job payloads "
        "and the request log included, in one transaction, and keep an audit record with no personal data. "
        "Lists what outside services hold about them, to erase there."
    )

    def add_arguments(self, parser):
        add_subject_arguments(parser)
        parser.add_argument("--dry-run", action="store_true", help="Show the rows that would go; change nothing.")
        parser.add_argument(
            "--no-input", "--noinput", action="store_false", dest="interactive", help="Do not ask to confirm."
        )

    def handle(self, *args, **options):
        subject = subject_from(options)
        with transaction.atomic():
            found = subject_find(subject)
        self._table("Rows about the person", found.counts())
        if options["dry_run"]:
            self._elsewhere(found.held_elsewhere())
            return
        if options["interactive"] and input("Type 'erase' to erase them for good: ").strip() != "erase":
            raise CommandError("Nothing erased.")
        erasure = subject_erase(subject=subject, actor=actor_from(options))
        self._table(f"Erased (subject request #{erasure.request.pk})", erasure.rows)
        self._elsewhere(erasure.held_elsewhere)

    def _table(self, title: str, counts: dict[str, int]):
        self.stdout.write(f"{title}:" if counts else f"{title}: none")
        for table, rows in counts.items():
            self.stdout.write(f"  {table}: {rows}")

    def _elsewhere(self, held_elsewhere: list[dict]):
        if held_elsewhere:
            self.stdout.write("Held by outside services, to erase there:")
            for held in held_elsewhere:
                self.stdout.write(f"  {held['service']} {held['what']}: {held['id']}")
