"""Writes: the purge."""

from dataclasses import dataclass

import structlog

from blog import cache as posts_cache

logger = structlog.get_logger(__name__)


@dataclass(frozen=True)
class PurgeResult:
    previous_generation: int
    generation: int


def blog_cache_purge(*, actor: str) -> PurgeResult:
    """Make every cached posts answer unreachable at once (one counter increment, whatever the number of keys)."""
    previous, generation = posts_cache.generation_advance()
    logger.info("blog_cache_purged", actor=actor, generation=generation)
    return PurgeResult(previous_generation=previous, generation=generation)
