"""Job handlers of inbound lead sources."""

import jobs
from sources import services


@jobs.handler(services.FETCH_KIND)
def facebook_fetch(job):
    """A Facebook lead, read from the Graph API and made: retried by the job layer while Graph fails."""
    services.facebook_lead_fetch(job=job)


@jobs.handler(services.RETENTION_KIND, batched=False)
def delete_old_requests(job):
    services.requests_retention_run(job_key=job.key, part=job.payload["part"])
