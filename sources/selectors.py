"""Reads of inbound lead sources."""

import time
import uuid

from django.db.models import Q, TextField
from django.db.models.functions import Cast
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from sources.models import InboundLead, InboundRequest, InboundSource

# Each process keeps an active source it read for this long, so that a webhook reads no row before its leads
# are checked. Saving or deleting a source drops it in the process that saved it; the others see a deactivated
# source, a new secret or a new mapping within this window. A dict with an expiry: Django's local-memory cache
# would pickle the row on every read. Only active sources are kept, so its size is bounded by theirs.
SOURCE_KEPT_SECONDS = 5.0
_receiving: dict[uuid.UUID, tuple[float, InboundSource]] = {}


def source_receiving(*, public_id: str) -> InboundSource | None:
    """The active source a webhook URL names, or None (an unknown, malformed or inactive id alike). Kept for
    SOURCE_KEPT_SECONDS in this process."""
    try:
        public_id = uuid.UUID(public_id)
    except ValueError:
        return None
    now = time.monotonic()
    if (kept := _receiving.get(public_id)) and kept[0] > now:
        return kept[1]
    source = InboundSource.objects.filter(public_id=public_id, is_active=True).first()
    if source is None:
        _receiving.pop(public_id, None)
    else:
        _receiving[public_id] = (now + SOURCE_KEPT_SECONDS, source)
    return source


@receiver(post_save, sender=InboundSource)
@receiver(post_delete, sender=InboundSource)
def _source_changed(sender, instance, **kwargs):
    _receiving.pop(instance.public_id, None)


def source_last_payload(*, source: InboundSource) -> InboundRequest | None:
    """The source's latest signed request that held a lead (whatever the mapping made of it): what a mapping
    preview reads. Facebook's: one whose lead was fetched, since the notification holds only ids."""
    held_a_lead = InboundRequest.objects.filter(source=source, signature_ok=True).exclude(results={})
    if source.kind == InboundSource.Kind.FACEBOOK:
        held_a_lead = held_a_lead.exclude(fetched={})
    return held_a_lead.order_by("-received_at", "-pk").first()


# --- data-subject requests (privacy/) ------------------------------------------------------------


def subject_rows(*, lead_ids, texts) -> dict[str, list[dict]]:
    """The person's side of the request log, whole: the platform ids of the leads, and the logged requests
    that made one of them or whose body (or lead fetched from the platform) names one of `texts`.
    {model label: rows}."""
    made = InboundLead.objects.filter(lead__in=lead_ids)
    requests = Q(lead__in=lead_ids) | Q(pk__in=made.exclude(request=None).values("request_id"))
    for text in texts:
        requests |= Q(body__icontains=text) | Q(fetched_text__icontains=text)
    named = InboundRequest.objects.annotate(fetched_text=Cast("fetched", TextField())).filter(requests)
    logged = InboundRequest.objects.filter(pk__in=named.values("pk")).order_by("pk")
    return {
        InboundLead._meta.label: list(made.order_by("pk").values()),
        InboundRequest._meta.label: list(logged.values()),
    }
