"""Periodic tasks declared in code.

`manage.py sync_schedules` (run after every migrate and by `make run`) creates
the missing ones as django-celery-beat rows; operators may then change or
disable them in admin without a later sync undoing it (`--reset` does).
"""

from django.conf import settings

PERIODIC_TASKS = {
    "jobs: sweep due and abandoned jobs": {
        "task": "jobs.sweep",
        "every_seconds": settings.JOBS_SWEEP_SECONDS,
    },
    "leads: forget expired idempotency keys": {
        "task": "leadgen.purge_idempotency_keys",
        "every_seconds": 3600,
    },
    "tracking: poll lead mailboxes": {
        "task": "tracking.poll_mailboxes",
        "every_seconds": settings.IMAP_POLL_SECONDS,
    },
    "sessions: delete expired sessions": {
        "task": "tracking.clear_expired_sessions",
        "every_seconds": 3600,
    },
    "tracking: daily CRM sync and retention": {
        "task": "tracking.daily_sync",
        "crontab": {"minute": "0", "hour": str(settings.TRACKING_SYNC_HOUR_UTC)},
    },
    "prototypes: re-check unfinished prototypes whose checks stopped": {
        "task": "prototypes.recover",
        "every_seconds": 3600,
    },
    "chat: delete expired transcripts": {
        "task": "chat.retention",
        "crontab": {"minute": "30", "hour": str(settings.CHAT_RETENTION_HOUR_UTC)},
    },
    "sources: delete request-log rows past SOURCES_REQUEST_LOG_DAYS": {
        "task": "sources.retention",
        "every_seconds": 3600,
    },
    "crm: alert managers of tasks past their due time": {
        "task": "crm.escalate_overdue",
        "every_seconds": settings.TASK_ESCALATION_CHECK_SECONDS,
    },
    "jobs: delete finished jobs past JOBS_RETENTION_DAYS": {
        "task": "jobs.retention_start",
        "crontab": {"minute": "30", "hour": str(settings.JOBS_RETENTION_HOUR_UTC)},
    },
}
