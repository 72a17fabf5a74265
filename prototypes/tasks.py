from datetime import timedelta

from celery import shared_task
from django.utils import timezone

from prototypes.services import prototypes_recover


@shared_task(name="prototypes.recover")
def recover():
    """Hourly safety net: unfinished prototypes of the last two days whose checks stopped get one again."""
    return prototypes_recover(since=timezone.now() - timedelta(days=2))
