from datetime import datetime, time

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from crm.services import lead_created_replay


def _moment(value: str) -> datetime:
    """YYYY-MM-DD (midnight, admin time zone) or an ISO 8601 date-time."""
    try:
        moment = datetime.fromisoformat(value)
    except ValueError as exc:
        raise CommandError(f"--since: {value!r} is not a date (YYYY-MM-DD) or an ISO 8601 date-time") from exc
    if len(value) == 10:
        moment = datetime.combine(moment.date(), time())
    return timezone.make_aware(moment) if timezone.is_naive(moment) else moment


class Command(BaseCommand):
    help = (
        "Emit LeadCreated again for every complete email lead received since DATE. The lead processor is "
        "idempotent: it fills in missing contacts, tasks and timeline events and changes nothing else."
    )

    def add_arguments(self, parser):
        parser.add_argument("--since", required=True, metavar="DATE", help="YYYY-MM-DD or an ISO 8601 date-time.")

    def handle(self, *args, since, **options):
        count = lead_created_replay(since=_moment(since), actor="manage.py replay_lead_created")
        self.stdout.write(f"Enqueued {count} LeadCreated job(s).")
