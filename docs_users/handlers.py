"""Job handlers of the signed-in docs and MCP users: the CRM sync, one profile delivery, retention."""

from docs_users import sync
from jobs import handler


@handler(sync.SYNC_KIND, batched=False)
def sync_pending_users(job):
    sync.profile_sync_run(job=job)


@handler(sync.DELIVER_KIND)
def deliver_profile(job):
    sync.profile_deliver(user_id=job.payload["user_id"], webhook_id=job.key)


@handler(sync.RETENTION_KIND, batched=False)
def delete_inactive_users(job):
    sync.retention_run(job=job)
