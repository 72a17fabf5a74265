"""Side effects recorded step by step, so that a job run again after a partial success does not repeat them."""

from django.db import IntegrityError, transaction

from jobs.models import JobStep


def job_step_result(*, job, step: str) -> dict | None:
    """What `step` returned when an earlier run of this job completed it, or None."""
    return JobStep.objects.filter(job_key=job.key, step=step).values_list("result", flat=True).first()


def job_step_record(*, job, step: str, result: dict) -> None:
    """Record `step` as done, in its own transaction (it must outlive a failure of the rest of the job)."""
    try:
        with transaction.atomic():
            JobStep.objects.create(job_key=job.key, step=step, result=result)
    except IntegrityError:
        pass  # recorded already by a run that raced this one; the first record stands
