"""Celery runs the handlers; the Job table is the record. Tasks stay thin."""

from celery import shared_task

from jobs import services


@shared_task(name="jobs.run")
def run_job(job_id):
    services.job_run(job_id=job_id)


@shared_task(name="jobs.sweep")
def sweep():
    return services.jobs_sweep()
