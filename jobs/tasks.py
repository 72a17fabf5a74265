"""Celery runs the handlers; the Job table is the record. Tasks stay thin."""

import structlog
from celery import shared_task
from django.db import close_old_connections

from jobs import services

logger = structlog.get_logger(__name__)


@shared_task(name="jobs.run")
def run_job(job_id):
    services.job_run(job_id=job_id)


@shared_task(name="jobs.run_many")
def run_jobs(job_ids):
    """The due jobs of one enqueue call, in order. A job that cannot even be run (its claim or finish
    failed, e.g. the database went away) is logged and left to the sweep; the others still run."""
    for job_id in job_ids:
        try:
            services.job_run(job_id=job_id)
        except Exception:
            logger.exception("job_run_failed", job_id=job_id)
            close_old_connections()  # a broken connection is not handed to the next job


@shared_task(name="jobs.sweep")
def sweep():
    return services.jobs_sweep()
