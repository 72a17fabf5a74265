"""The lead's side of its AI prototype: the preview on the lead, the rate-limit hold and the quota.

prototypes reports how a lead's prototype goes through jobs of its own kinds (prototypes.processor's
CHECKED_KIND and FINISHED_KIND), enqueued in the transaction of the change; their handlers
(leadgen.handlers) call these.
"""

from django.utils import timezone

from leadgen.models import Lead
from leadgen.ratelimit import prototype_buckets_consume, prototype_buckets_extend, prototype_buckets_release


def lead_prototype_renew(*, lead: Lead) -> None:
    """The lead's prototype is still being worked on: keep its rate-limit hold."""
    prototype_buckets_extend(email=lead.email, ip=lead.client_ip)


def lead_prototype_settle(*, lead: Lead, completed: bool, once_key: str) -> bool:
    """The lead's prototype ended: completed consumes both buckets' quota (once per `once_key`),
    anything else only drops the hold. Returns whether quota was counted by this call."""
    if completed:
        return prototype_buckets_consume(email=lead.email, ip=lead.client_ip, once_key=once_key)
    prototype_buckets_release(email=lead.email, ip=lead.client_ip)
    return False


def lead_preview_set(*, lead: Lead, url: str) -> None:
    """The lead's prototype preview URL, as its prototype completed."""
    lead.preview_url, lead.updated_at = url, timezone.now()
    Lead.objects.filter(pk=lead.pk).update(preview_url=lead.preview_url, updated_at=lead.updated_at)
