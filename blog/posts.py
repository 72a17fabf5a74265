"""WordPress posts turned into the answers we serve: our fields only, HTML sanitized.

Sanitizing happens here, before anything is cached, with nh3 (the ammonia
sanitizer): scripts, styles, iframes, event-handler attributes and
`javascript:` URLs go; the ordinary markup of a post stays, plus `class` (the
block editor's layout classes) and responsive image attributes, a `srcset`
only when every candidate in it is an http(s) URL. Titles, author and
category names keep their text and entities only. Every other field is
validated, else left out (null, or "" for a slug): ids are positive integers,
dates ISO 8601, slugs SLUG, the featured image an http(s) URL.

`detailUrl` is built from SITE_URL, never from the request's Host: the same
cached bytes are served to everyone. WordPress keeps non-ASCII slugs
percent-encoded; the URL is built from the decoded slug so it is encoded once.
"""

import copy
import re
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import unquote, urlsplit

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

# A slug as WordPress writes it (letters, digits, hyphens, UTF-8 percent-encoded) and as our detail URL takes it.
SLUG = re.compile(r"[\w%.~-]{1,200}")
URL_MAX_CHARS = 2048
# Characters that could end an attribute, open a tag or hide a scheme (browsers drop tabs and newlines in URLs).
_URL_UNSAFE = re.compile(r"[\x00-\x20\x7f\"'<>\\`]")
_SRCSET_DESCRIPTOR = re.compile(r"[1-9]\d{0,4}w|\d{1,2}(?:\.\d{1,3})?x")


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
    return nh3.clean(
        html or "", attributes=_ATTRIBUTES, attribute_filter=_checked_attribute, link_rel="noopener noreferrer"
    )


def sanitize_text(html) -> str:
    """Text and entities only; a value that is no string (WordPress can send anything) is empty."""
    return nh3.clean(html if isinstance(html, str) else "", tags=set())


def _web_url(value) -> str | None:
    """`value` when it is an absolute http(s) URL with a host and nothing that could leave an attribute."""
    if not isinstance(value, str) or len(value) > URL_MAX_CHARS or _URL_UNSAFE.search(value):
        return None
    try:
        parts = urlsplit(value)
    except ValueError:
        return None
    return value if parts.scheme.lower() in ("http", "https") and parts.hostname else None


def _slug(value) -> str | None:
    """`value` when it is a SLUG that names one path segment once decoded, else None."""
    if not isinstance(value, str) or not SLUG.fullmatch(value):
        return None
    decoded = unquote(value)
    return value if "/" not in decoded and decoded.strip(".") else None


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
    slug = _slug(post.get("slug")) or ""
    return {
        "id": _positive_int(post.get("id")),
        "slug": slug,
        "title": sanitize_text(_rendered(post.get("title"))),
        "excerpt": sanitize_html(_rendered(post.get("excerpt"))),
        "date": _iso_datetime(post.get("date")),
        "modified": _iso_datetime(post.get("modified")),
        "authorName": sanitize_text(_first(embedded.get("author")).get("name")) or None,
        "categories": _categories(post, embedded),
        "featuredImageUrl": _web_url(_first(embedded.get("wp:featuredmedia")).get("source_url")),
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
    groups = embedded.get("wp:term") if isinstance(embedded.get("wp:term"), list) else []
    for group in groups:
        for term in group if isinstance(group, list) else []:
            if isinstance(term, dict) and term.get("taxonomy") == "category" and _positive_int(term.get("id")):
                terms[term["id"]] = term
    ids = post.get("categories") if isinstance(post.get("categories"), list) else []
    return [
        {"id": term_id, "name": sanitize_text(terms.get(term_id, {}).get("name")) or None,
         "slug": _slug(terms.get(term_id, {}).get("slug"))}
        for term_id in ids
        if _positive_int(term_id) is not None
    ]  # fmt: skip


def _positive_int(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 2**63 else None


def _iso_datetime(value) -> str | None:
    if not isinstance(value, str) or len(value) > 40:
        return None
    try:
        datetime.fromisoformat(value)
    except ValueError:
        return None
    return value


def _checked_attribute(element: str, attribute: str, value: str) -> str | None:
    # nh3 checks the schemes of URL attributes (src, href); srcset is a list of URLs it does not read.
    return _srcset(value) if attribute == "srcset" else value


def _srcset(value: str) -> str | None:
    """The srcset when each of its candidates is an http(s) URL with at most a width or density descriptor;
    otherwise none at all, and the image keeps its src. (A URL with a comma in it drops the srcset too.)"""
    candidates = []
    for candidate in value.split(","):
        tokens = candidate.split()
        if not tokens:
            continue  # a stray comma
        if len(tokens) > 2 or _web_url(tokens[0]) is None:
            return None
        if len(tokens) == 2 and not _SRCSET_DESCRIPTOR.fullmatch(tokens[1]):
            return None
        candidates.append(" ".join(tokens))
    return ", ".join(candidates) or None
