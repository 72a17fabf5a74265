"""Job handlers of the sales chat."""

from chat import services
from jobs import handler


@handler(services.RETENTION_KIND, batched=False)
def delete_expired_transcripts(job):
    services.chat_retention_run(job_key=job.key, part=job.payload["part"])
