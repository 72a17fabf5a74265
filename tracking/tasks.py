"""Thin Celery tasks of email lead tracking."""

from celery import shared_task

from tracking import selectors, services, sync


@shared_task(name="tracking.poll_mailboxes")
def poll_mailboxes():
    """Beat, every IMAP_POLL_SECONDS: a poll job per active mailbox."""
    return [job.pk for job in services.mailbox_polls_enqueue(mailbox_names=selectors.mailbox_names_active())]


@shared_task(name="tracking.daily_sync")
def daily_sync():
    """Beat, daily at TRACKING_SYNC_HOUR_UTC: only queues the sync and retention jobs."""
    sync_jobs, retention_job = sync.daily_sync_start(reason="beat")
    return [*(job.pk for job in sync_jobs), retention_job.pk]


@shared_task(name="tracking.clear_expired_sessions")
def clear_expired_sessions():
    """Beat, hourly: docs sign-ins and admin logins leave session rows; expired ones are deleted."""
    services.sessions_clear_expired()
