from jobs.models import Job


def jobs_dead_count() -> int:
    return Job.objects.filter(status=Job.Status.DEAD).count()


def jobs_for_key_prefix(prefix: str):
    """Jobs whose idempotency key starts with `prefix`, e.g. every job of one lead."""
    return Job.objects.filter(key__startswith=prefix)
