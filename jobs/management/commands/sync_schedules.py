from django.core.management.base import BaseCommand
from django.db import transaction
from django_celery_beat.models import CrontabSchedule, IntervalSchedule, PeriodicTask

from foundation.schedules import PERIODIC_TASKS


class Command(BaseCommand):
    help = "Create the periodic tasks declared in foundation/schedules.py that beat does not have yet."

    def add_arguments(self, parser):
        parser.add_argument("--reset", action="store_true", help="Also overwrite ones edited in admin.")

    @transaction.atomic
    def handle(self, *args, reset=False, **options):
        for name, spec in PERIODIC_TASKS.items():
            defaults = {"task": spec["task"], "enabled": True, **_schedule(spec)}
            if reset:
                _, created = PeriodicTask.objects.update_or_create(name=name, defaults=defaults)
            else:
                _, created = PeriodicTask.objects.get_or_create(name=name, defaults=defaults)
            self.stdout.write(f"{'created' if created else 'kept'}: {name}")


def _schedule(spec) -> dict:
    """The beat schedule of a task: every N seconds, or a crontab (in UTC, CELERY_TIMEZONE)."""
    if "crontab" in spec:
        crontab, _ = CrontabSchedule.objects.get_or_create(**spec["crontab"], timezone="UTC")
        return {"crontab": crontab, "interval": None}
    interval, _ = IntervalSchedule.objects.get_or_create(every=spec["every_seconds"], period=IntervalSchedule.SECONDS)
    return {"interval": interval, "crontab": None}
