"""Celery runs the handlers; the Job table is the record. Tasks stay thin."""

from celery import shared_task
from celery.signals import worker_process_shutdown

from jobs import dispatch, runtime
from jobs.kinds import RETENTION_TASK, RUN_MANY_TASK, RUN_TASK, SWEEP_TASK
from jobs.retention import jobs_retention_start


@shared_task(name=RUN_TASK)
def run_job(job_id):
    runtime.job_run(job_id=job_id)


@shared_task(name=RUN_MANY_TASK)
def run_jobs(job_ids):
    """The due jobs of one run message, in order (runtime.jobs_run)."""
    runtime.jobs_run(job_ids=job_ids)


@shared_task(name=SWEEP_TASK)
def sweep():
    return runtime.jobs_sweep()


@shared_task(name=RETENTION_TASK)
def retention_start():
    """Beat, daily at JOBS_RETENTION_HOUR_UTC: only queues the retention job."""
    return jobs_retention_start().pk


@worker_process_shutdown.connect
def flush_run_messages(**kwargs):
    """A prefork child leaves with os._exit, so atexit never runs there: the run messages it still
    holds (jobs/dispatch.py) go out now, not at the next sweep, which Operations may have turned off."""
    dispatch.run_messages.flush()
