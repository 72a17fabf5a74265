"""Reads of inbound lead sources."""

import uuid

from sources.models import InboundRequest, InboundSource


def source_receiving(*, public_id: str) -> InboundSource | None:
    """The active source a webhook URL names, or None (an unknown, malformed or inactive id alike)."""
    try:
        public_id = uuid.UUID(public_id)
    except ValueError:
        return None
    return InboundSource.objects.filter(public_id=public_id, is_active=True).first()


def source_last_payload(*, source: InboundSource) -> InboundRequest | None:
    """The source's latest signed request that held a lead (whatever the mapping made of it): what a mapping
    preview reads. Facebook's: one whose lead was fetched, since the notification holds only ids."""
    held_a_lead = InboundRequest.objects.filter(source=source, signature_ok=True).exclude(results={})
    if source.kind == InboundSource.Kind.FACEBOOK:
        held_a_lead = held_a_lead.exclude(fetched={})
    return held_a_lead.order_by("-received_at", "-pk").first()
