"""WordPress posts turned into the answers we serve: our fields only, HTML sanitized.

Sanitizing happens here, before anything is cached, with nh3 (the ammonia
sanitizer): scripts, styles, iframes, event-handler attributes and
`javascript:` URLs go; the ordinary markup of a post stays, plus `class` (the
block editor's layout classes) and responsive image attributes. Titles keep
their text and entities only.

`detailUrl` is built from SITE_URL, never from the request's Host: the same
cached bytes are served to everyone. WordPress keeps non-ASCII slugs
percent-encoded; the URL is built from the decoded slug so it is encoded once.
"""

import copy
from dataclasses import dataclass
from urllib.parse import unquote

import nh3
from django.conf import settings
from django.urls import reverse

LIST_FIELDS = ("id", "slug", "title", "excerpt", "date", "modified", "authorName", "categories",
               "featuredImageUrl", "detailUrl")  # fmt: skip
DETAIL_FIELDS = (*LIST_FIELDS, "content")
# What we ask WordPress for: the fields we read, the links that `_embed` follows, and the embeds.
UPSTREAM_FIELDS = ("id", "slug", "title", "excerpt", "date", "modified", "author", "categories", "featured_media",
                   "_links", "_embedded")  # fmt: skip
UPSTREAM_DETAIL_FIELDS = (*UPSTREAM_FIELDS, "content")
UPSTREAM_EMBEDS = ("author", "wp:featuredmedia", "wp:term")

_ATTRIBUTES = copy.deepcopy(nh3.ALLOWED_ATTRIBUTES)
_ATTRIBUTES["*"] = {"class"}
_ATTRIBUTES.setdefault("img", set()).update({"srcset", "sizes", "width", "height", "loading"})


@dataclass(frozen=True)
class PostsQuery:
    """A validated posts list request; `cache_name` is the same for requests that mean the same."""

    page: int = 1
    per_page: int = 10
    search: str = ""
    categories: tuple[int, ...] = ()
    tags: tuple[int, ...] = ()
    orderby: str = "date"
    order: str = "desc"
    fields: tuple[str, ...] = ()  # a subset of LIST_FIELDS; empty: all

    @property
    def cache_name(self) -> str:
        return repr(("posts", self.page, self.per_page, self.search, tuple(sorted(self.categories)),
                     tuple(sorted(self.tags)), self.orderby, self.order, tuple(sorted(self.fields))))  # fmt: skip


def sanitize_html(html: str) -> str:
    return nh3.clean(html or "", attributes=_ATTRIBUTES, link_rel="noopener noreferrer")


def sanitize_text(html: str) -> str:
    return nh3.clean(html or "", tags=set())


def post_summary(post: dict, fields: tuple[str, ...] = ()) -> dict:
    """One post of a list answer."""
    shaped = _shaped(post)
    return {name: shaped[name] for name in (fields or LIST_FIELDS)}


def post_detail(post: dict) -> dict:
    shaped = _shaped(post)
    shaped["content"] = sanitize_html(_rendered(post.get("content")))
    return {name: shaped[name] for name in DETAIL_FIELDS}


def _shaped(post: dict) -> dict:
    embedded = post.get("_embedded") if isinstance(post.get("_embedded"), dict) else {}
    slug = str(post.get("slug") or "")
    return {
        "id": post.get("id"),
        "slug": slug,
        "title": sanitize_text(_rendered(post.get("title"))),
        "excerpt": sanitize_html(_rendered(post.get("excerpt"))),
        "date": post.get("date"),
        "modified": post.get("modified"),
        "authorName": _first(embedded.get("author")).get("name") or None,
        "categories": _categories(post, embedded),
        "featuredImageUrl": _image_url(_first(embedded.get("wp:featuredmedia"))),
        "detailUrl": settings.SITE_URL.rstrip("/") + reverse("blog-post-detail", args=[unquote(slug)])
        if slug
        else None,
    }


def _rendered(value) -> str:
    if isinstance(value, dict):
        value = value.get("rendered")
    return value if isinstance(value, str) else ""


def _first(items) -> dict:
    return items[0] if isinstance(items, list) and items and isinstance(items[0], dict) else {}


def _categories(post: dict, embedded: dict) -> list[dict]:
    """Id, name and slug of each category, names from the embedded terms when WordPress sent them."""
    terms = {}
    for group in embedded.get("wp:term") or []:
        for term in group if isinstance(group, list) else []:
            if isinstance(term, dict) and term.get("taxonomy") == "category":
                terms[term.get("id")] = term
    ids = post.get("categories") if isinstance(post.get("categories"), list) else []
    return [
        {"id": term_id, "name": sanitize_text(terms.get(term_id, {}).get("name", "")) or None,
         "slug": terms.get(term_id, {}).get("slug")}
        for term_id in ids
    ]  # fmt: skip


def _image_url(media: dict) -> str | None:
    url = media.get("source_url")
    return url if isinstance(url, str) and url.startswith(("https://", "http://")) else None
