"""Thin Celery tasks of the signed-in docs and MCP users. The task names are the ones beat's schedule
(foundation/schedules.py) has always used."""

from celery import shared_task

from docs_users import services, sync


@shared_task(name="tracking.daily_sync")
def daily_sync():
    """Beat, daily at TRACKING_SYNC_HOUR_UTC: only queues the sync and retention jobs."""
    sync_jobs, retention_job = sync.daily_sync_start(reason="beat")
    return [*(job.pk for job in sync_jobs), retention_job.pk]


@shared_task(name="tracking.clear_expired_sessions")
def clear_expired_sessions():
    """Beat, hourly: docs sign-ins and admin logins leave session rows; expired ones are deleted."""
    services.sessions_clear_expired()
