"""Thin Celery tasks of inbound lead sources."""

from celery import shared_task

from sources import services


@shared_task(name="sources.retention")
def retention():
    """Beat, hourly: only queues the request log's retention job."""
    services.requests_retention_start()
