"""Writes: the purge, and the check of the signed purge WordPress sends on publish."""

import contextlib
from dataclasses import dataclass

import structlog
from django.conf import settings
from django.core.cache import cache
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from blog import cache as posts_cache

logger = structlog.get_logger(__name__)

WEBHOOK_ID_SECONDS = 600  # a signed purge's id is remembered longer than the signature's 5-minute tolerance


class InvalidSignature(Exception):
    """A purge whose Standard Webhooks signature is invalid, expired or incomplete."""


@dataclass(frozen=True)
class PurgeResult:
    previous_generation: int | None  # None: a signed purge already applied, nothing done now
    generation: int
    purged: bool = True


def purge_webhook_id(body: bytes, headers) -> str | None:
    """The webhook-id of a purge with a valid signature; None when it carries no signature (or signing is off).
    Raises InvalidSignature for a signature that does not verify."""
    secret = settings.BLOG_PURGE_SIGNING_SECRET
    if not secret or "webhook-signature" not in headers:
        return None
    try:
        Webhook(secret).verify(body, dict(headers), json_parse=False)
    except (WebhookVerificationError, ValueError) as exc:
        logger.info("blog_purge_signature_refused", reason=str(exc)[:100])
        raise InvalidSignature() from exc
    return headers["webhook-id"][:200]


def blog_cache_purge(*, actor: str, webhook_id: str | None = None) -> PurgeResult:
    """Make every cached posts answer unreachable at once (one counter increment, whatever the number of keys).

    A signed purge (`webhook_id`) is applied once: the same message again (a retry after a lost answer) finds the
    cache emptied already. One that could not be applied (posts_cache.CACHE_ERRORS) is forgotten, so the sender's
    retry purges."""
    key = f"blog:purge-webhook:{webhook_id}"
    if webhook_id is not None and not cache.add(key, 1, timeout=WEBHOOK_ID_SECONDS):
        return PurgeResult(previous_generation=None, generation=posts_cache.current_generation(), purged=False)
    try:
        previous, generation = posts_cache.generation_advance()
    except posts_cache.CACHE_ERRORS:
        if webhook_id is not None:
            with contextlib.suppress(*posts_cache.CACHE_ERRORS):
                cache.delete(key)
        raise
    logger.info("blog_cache_purged", actor=actor, generation=generation)
    return PurgeResult(previous_generation=previous, generation=generation)
