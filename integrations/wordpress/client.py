"""Posts read through the WordPress REST API v2 (`{WORDPRESS_API_URL}/wp/v2/posts`).

What the API does, as WP_REST_Posts_Controller implements it:

- `GET /wp/v2/posts` takes `page`, `per_page` (1–100, else `400 rest_invalid_param`),
  `search`, `categories` and `tags` (comma-separated term ids), `orderby`, `order`,
  `slug`, `_fields` (comma-separated top-level fields to keep) and `_embed` (linked
  resources under `_embedded`: `author`, `wp:featuredmedia`, `wp:term`).
- The answer is a JSON list; `X-WP-Total` and `X-WP-TotalPages` carry the counts.
- A page past the last one is `400 {"code": "rest_post_invalid_page_number", ...}`,
  except with zero matching posts, where every page is `200 []` with a total of 0.
- A single post by slug is the same collection filtered with `?slug=`: a list of at
  most one post, `[]` when there is none.
- Application passwords are HTTP Basic credentials (user name, application password).

The client runs in the request path, so answers are bounded in size and time
(WORDPRESS_TIMEOUT_SECONDS) and every failure is a TransientError (timeouts,
connection errors, 429, 5xx) or a PermanentError (other 4xx, an answer that is
not what the API returns), as HttpClient maps them.
"""

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass

from django.conf import settings
from urllib3.util import make_headers

import jobs
from integrations.http import HttpClient

MAX_RESPONSE_BYTES = 8 * 1024 * 1024  # 100 posts with their embeds stay far below this
INVALID_PAGE_CODE = "rest_post_invalid_page_number"


class PageOutOfRange(jobs.PermanentError):
    """The page asked for is past the last page of a non-empty result."""


@dataclass(frozen=True)
class PostsPage:
    posts: list[dict]
    total: int
    total_pages: int


class WordPressClient(HttpClient):
    service = "wordpress"

    def __init__(self, api_url: str, *, username: str = "", app_password: str = "", **kwargs):
        super().__init__(api_url, **kwargs)
        if username and app_password:
            self.headers["Authorization"] = make_headers(basic_auth=f"{username}:{app_password}")["authorization"]

    def raise_for_status(self, response) -> None:
        """A 400 names its reason in the body: a page past the last one is its own error."""
        if response.status_code == 400:
            raise _bad_request_error(response)
        super().raise_for_status(response)

    def posts(
        self,
        *,
        page: int = 1,
        per_page: int = 10,
        search: str = "",
        categories: Iterable[int] = (),
        tags: Iterable[int] = (),
        orderby: str = "",
        order: str = "",
        fields: Iterable[str] = (),
        embed: Iterable[str] | bool = False,
    ) -> PostsPage:
        """One page of published posts. Raises PageOutOfRange past the last page."""
        params = {"page": page, "per_page": per_page}
        params.update(_optional(search=search, orderby=orderby, order=order))
        params.update(_lists(categories=categories, tags=tags, _fields=fields))
        params.update(_embed_param(embed))
        response, body = self._get_posts(params)
        posts = _json_list(body)
        total = _count_header(response, "X-WP-Total")
        total_pages = _count_header(response, "X-WP-TotalPages")
        return PostsPage(posts=posts, total=total, total_pages=total_pages)

    def post_by_slug(
        self, slug: str, *, fields: Iterable[str] = (), embed: Iterable[str] | bool = False
    ) -> dict | None:
        """The published post with this slug, or None."""
        params = {"slug": slug, "per_page": 1, **_lists(_fields=fields), **_embed_param(embed)}
        _, body = self._get_posts(params)
        posts = _json_list(body)
        return posts[0] if posts else None

    def _get_posts(self, params: dict):
        """The response and its body, read with a size bound (stream=True defers the read to here)."""
        deadline = time.monotonic() + 2 * self.timeout[1]
        response = self.get("wp/v2/posts", params=params, stream=True)
        declared = response.headers.get("Content-Length", "")
        if declared.isdigit() and int(declared) > MAX_RESPONSE_BYTES:
            response.close()
            raise jobs.PermanentError("wordpress: answer too large")
        return response, _read_capped(response, MAX_RESPONSE_BYTES, deadline)


def client_from_settings() -> WordPressClient | None:
    """None until WORDPRESS_API_URL is set."""
    if not settings.WORDPRESS_API_URL:
        return None
    timeout = settings.WORDPRESS_TIMEOUT_SECONDS
    return WordPressClient(
        settings.WORDPRESS_API_URL,
        username=settings.WORDPRESS_USERNAME,
        app_password=settings.WORDPRESS_APP_PASSWORD,
        connect_timeout=min(timeout, settings.HTTP_CONNECT_TIMEOUT),
        read_timeout=timeout,
    )


def _bad_request_error(response) -> jobs.PermanentError:
    try:
        code = json.loads(_read_capped(response, 64 * 1024)).get("code")
    except (ValueError, AttributeError, jobs.PermanentError, jobs.TransientError):
        code = None
    if code == INVALID_PAGE_CODE:
        return PageOutOfRange("wordpress: page past the last page")
    return jobs.PermanentError(f"wordpress: HTTP 400 {code or ''}".strip())


def _read_capped(response, limit: int, deadline: float | None = None) -> bytes:
    """The decoded body, refusing more than `limit` bytes or a body still trickling in at `deadline`
    (the read timeout bounds each read, not the whole body). A body cut off is a TransientError."""
    chunks, size = [], 0
    try:
        for chunk in response.iter_content(64 * 1024):
            size += len(chunk)
            if size > limit:
                raise jobs.PermanentError("wordpress: answer too large")
            if deadline is not None and time.monotonic() > deadline:
                raise jobs.TransientError("wordpress: answer too slow")
            chunks.append(chunk)
    finally:
        response.close()
    return b"".join(chunks)


def _json_list(body: bytes) -> list[dict]:
    try:
        body = json.loads(body)
    except ValueError as exc:
        raise jobs.PermanentError("wordpress: answer is not JSON") from exc
    if not isinstance(body, list) or not all(isinstance(post, dict) for post in body):
        raise jobs.PermanentError("wordpress: answer is not a list of posts")
    return body


def _count_header(response, name: str) -> int:
    value = response.headers.get(name, "")
    if not value.isdigit():
        raise jobs.PermanentError(f"wordpress: {name} missing or not a count")
    return int(value)


def _optional(**params) -> dict:
    return {name: value for name, value in params.items() if value}


def _lists(**params) -> dict:
    return {name: ",".join(str(item) for item in values) for name, values in params.items() if values}


def _embed_param(embed: Iterable[str] | bool) -> dict:
    if embed is True:
        return {"_embed": "1"}
    if embed:
        return {"_embed": ",".join(embed)}
    return {}
