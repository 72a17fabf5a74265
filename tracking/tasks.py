"""Thin Celery tasks of email lead tracking."""

from celery import shared_task

from tracking import selectors, services


@shared_task(name="tracking.poll_mailboxes")
def poll_mailboxes():
    """Beat, every IMAP_POLL_SECONDS: a poll job per active mailbox."""
    return [job.pk for job in services.mailbox_polls_enqueue(mailbox_names=selectors.mailbox_names_active())]

