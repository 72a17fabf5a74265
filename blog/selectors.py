"""Reads: posts through the cache (blog.cache), and the cache's figures for the admin page."""

import json
from dataclasses import dataclass

import structlog
from django.conf import settings

import jobs
from blog import cache as posts_cache
from blog.posts import UPSTREAM_DETAIL_FIELDS, UPSTREAM_EMBEDS, UPSTREAM_FIELDS, PostsQuery, post_detail, post_summary
from foundation.api import error_body
from integrations.wordpress.client import PageOutOfRange, client_from_settings

logger = structlog.get_logger(__name__)

PAGE_OUT_OF_RANGE = "page_out_of_range"
POST_NOT_FOUND = "post_not_found"


def blog_configured() -> bool:
    return bool(settings.WORDPRESS_API_URL)


def posts_page(query: PostsQuery, *, refresh: bool = False, admit=None) -> posts_cache.Answer:
    """One page of posts, with pagination in the body and in X-WP-Total / X-WP-TotalPages.
    `admit` is called before WordPress may be asked (it raises to refuse: a rate limit)."""

    def fetch():
        try:
            page = _client().posts(
                page=query.page,
                per_page=query.per_page,
                search=query.search,
                categories=query.categories,
                tags=query.tags,
                orderby=query.orderby,
                order=query.order,
                fields=UPSTREAM_FIELDS,
                embed=UPSTREAM_EMBEDS,
            )
        except PageOutOfRange:
            return 404, _json(error_body(PAGE_OUT_OF_RANGE, f"Page {query.page} is past the last page of posts.")), ()
        except (jobs.TransientError, jobs.PermanentError) as exc:
            raise _failed(exc) from exc
        body = {
            "posts": [post_summary(post, query.fields) for post in page.posts],
            "page": query.page,
            "perPage": query.per_page,
            "total": page.total,
            "totalPages": page.total_pages,
        }
        return 200, _json(body), (("X-WP-Total", str(page.total)), ("X-WP-TotalPages", str(page.total_pages)))

    return posts_cache.read_through(query.cache_name, fetch, refresh=refresh, admit=admit)


def posts_page_cached(query: PostsQuery) -> posts_cache.Answer | None:
    """The page from the cache if it holds it fresh (a `hit`), else None; also None when Redis cannot be
    reached (posts_page then answers without the cache)."""
    try:
        return posts_cache.cached(query.cache_name)
    except posts_cache.CACHE_ERRORS:
        return None


def post_by_slug(slug: str, *, refresh: bool = False, admit=None) -> posts_cache.Answer:
    """One post with its sanitized content."""

    def fetch():
        try:
            post = _client().post_by_slug(slug, fields=UPSTREAM_DETAIL_FIELDS, embed=UPSTREAM_EMBEDS)
        except (jobs.TransientError, jobs.PermanentError) as exc:
            raise _failed(exc) from exc
        if post is None:
            return 404, _json(error_body(POST_NOT_FOUND, "No published post has this slug.")), ()
        return 200, _json(post_detail(post)), ()

    return posts_cache.read_through(repr(("post", slug)), fetch, refresh=refresh, admit=admit)


@dataclass(frozen=True)
class CacheOverview:
    configured: bool
    generation: int
    counts: dict[str, int]
    ttl_seconds: int
    stale_seconds: int


def cache_overview() -> CacheOverview:
    return CacheOverview(
        configured=blog_configured(),
        generation=posts_cache.current_generation(),
        counts=posts_cache.outcome_counts(),
        ttl_seconds=settings.BLOG_CACHE_TTL_SECONDS,
        stale_seconds=settings.BLOG_STALE_SECONDS,
    )


def _client():
    client = client_from_settings()
    if client is None:  # unset while the request was on its way: as down
        raise posts_cache.UpstreamFailed("wordpress: not configured")
    return client


def _failed(exc: Exception) -> posts_cache.UpstreamFailed:
    logger.warning("blog_upstream_failed", error=str(exc))
    return posts_cache.UpstreamFailed(str(exc))


def _json(body: dict) -> bytes:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
