"""Thin Celery tasks of the sales chat."""

from celery import shared_task

from chat import services


@shared_task(name="chat.retention")
def retention():
    """Beat, daily at CHAT_RETENTION_HOUR_UTC: only queues the retention job."""
    services.chat_retention_start()
