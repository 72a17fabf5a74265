"""Thin Celery tasks of the CRM."""

from celery import shared_task

from crm import escalation


@shared_task(name="crm.escalate_overdue")
def escalate_overdue():
    """Beat, every TASK_ESCALATION_CHECK_SECONDS: only queues the escalation job."""
    escalation.escalation_start()
