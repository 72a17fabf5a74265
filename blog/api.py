"""Blog endpoints: posts read through the cache, and the purge WordPress calls on publish."""

import functools

from django.conf import settings
from django.http import HttpResponse, HttpResponseNotModified
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.exceptions import APIException, NotFound, ValidationError
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from blog import cache as posts_cache
from blog import selectors, services
from blog.posts import SLUG
from blog.serializers import (
    PostDetailSerializer,
    PostQuerySerializer,
    PostsPageSerializer,
    PostsQuerySerializer,
    PurgeResultSerializer,
    validated_query,
)
from foundation.api import PayloadTooLarge
from foundation.secrets import header_secret_require
from foundation.throttling import ClientIpRateThrottle, ScopedRateThrottle

ERROR = OpenApiResponse(description='`{"error": {"code", "message", "fields"?}}`')
PURGE_MAX_BODY_BYTES = 64 * 1024
CACHE_CONTROL = "public, max-age=0, must-revalidate"  # browsers and CDNs revalidate with the ETag: purges reach them


def _header(name, description):
    return OpenApiParameter(name, OpenApiTypes.STR, OpenApiParameter.HEADER, response=True, description=description)


X_CACHE = _header("X-Cache", "hit, miss, stale (WordPress failed: the last good copy) or bypass (?cache=false).")
READ_HEADERS = [X_CACHE, _header("ETag", "Send it back in If-None-Match for a 304."),
                _header("Warning", "On stale answers only.")]  # fmt: skip
IF_NONE_MATCH = OpenApiParameter("If-None-Match", OpenApiTypes.STR, OpenApiParameter.HEADER)


# --- reads ------------------------------------------------------------------------------------------


class BlogUnavailable(APIException):
    status_code = 503
    default_detail = "The blog is unavailable right now and no earlier copy is kept; try again shortly."
    default_code = "blog_unavailable"


class BlogNotConfigured(APIException):
    status_code = 503
    default_detail = "The blog is not configured (WORDPRESS_API_URL)."
    default_code = "blog_not_configured"


class RefreshThrottle(ClientIpRateThrottle):
    """`?cache=false` reaches WordPress every time: a lower rate per client IP than cached reads."""

    scope = "blog_refresh"


class UpstreamThrottle(ClientIpRateThrottle):
    """Reads that reach WordPress (misses, refreshes), per client IP. A cache hit is not counted: it costs
    one cache read, and counting it would cost as much again (bench/blog)."""

    scope = "blog"


class BlogReadView(APIView):
    throttle_classes = []  # UpstreamThrottle, through admit_upstream, once the cache cannot answer
    renderer_classes = [JSONRenderer]

    @property
    def default_response_headers(self):
        # No Allow on a GET, whether the cache (posts_view) or this view answers it; OPTIONS and a 405 still get it.
        return {} if self.request.method in ("GET", "HEAD") else super().default_response_headers

    def perform_content_negotiation(self, request, force=False):
        # JSON is all these views answer: parsing Accept to choose among one renderer cost a tenth of a hit.
        return self.renderer_classes[0](), "application/json"

    def admit_upstream(self):
        """Called by the cache before WordPress may be asked: the rate limits (refreshes have their own too)."""
        throttles = [UpstreamThrottle(), RefreshThrottle()] if self.refresh else [UpstreamThrottle()]
        for throttle in throttles:
            if not throttle.allow_request(self.request, self):
                self.throttled(self.request, throttle.wait())

    def wants_refresh(self, request, data) -> bool:
        self.refresh = data["cache"] == "false"
        return self.refresh

    def answer(self, request, answer) -> HttpResponse:
        if answer.entry is None:
            raise BlogUnavailable()
        return _served(request, answer)

    def handle_exception(self, exc):
        response = super().handle_exception(exc)
        response.setdefault("X-Cache", "miss")  # every answer says whether it came from the cache
        if isinstance(exc, BlogUnavailable):
            response["Retry-After"] = "30"
        return response


def _served(request, answer: posts_cache.Answer) -> HttpResponse:
    """The answer of an entry as stored (no serialization), or a 304 when If-None-Match names it."""
    entry = answer.entry
    headers = {"X-Cache": answer.outcome, "ETag": entry.etag, "Cache-Control": CACHE_CONTROL}
    if answer.outcome == "stale":
        headers["Warning"] = '110 - "Response is Stale"'
    if entry.status == 200 and entry.matches(request.META.get("HTTP_IF_NONE_MATCH")):
        response = HttpResponseNotModified()
        for name, value in headers.items():
            response[name] = value
        return response
    return HttpResponse(entry.body, status=entry.status, headers={**headers, **dict(entry.headers)},
                        content_type="application/json")  # fmt: skip


class PostsView(BlogReadView):
    @extend_schema(
        operation_id="blog_posts_list",
        parameters=[PostsQuerySerializer, IF_NONE_MATCH, *READ_HEADERS,
                    _header("X-WP-Total", "Posts matching."), _header("X-WP-TotalPages", "Pages of per_page posts.")],
        responses={200: PostsPageSerializer, 304: None, 400: ERROR, 404: ERROR, 429: ERROR, 503: ERROR},
        description="Published posts from WordPress, cached. A page past the last is 404 `page_out_of_range`; "
        "with WordPress down the last good copy is served (`X-Cache: stale`), or 503 `blog_unavailable`.",
    )  # fmt: skip
    def get(self, request):
        data = validated_query(PostsQuerySerializer, request)
        if not selectors.blog_configured():
            raise BlogNotConfigured()
        refresh = self.wants_refresh(request, data)
        query = PostsQuerySerializer.query(data)
        return self.answer(request, selectors.posts_page(query, refresh=refresh, admit=self.admit_upstream))


def posts_view():
    """GET /api/posts: a cache hit is answered here, without DRF's request handling (bench/blog); everything
    else (misses, refreshes, invalid queries, other methods) by PostsView."""
    view = PostsView.as_view()

    @functools.wraps(view)  # csrf_exempt and the view class (the schema) as PostsView's
    def posts(request):
        if request.method == "GET" and selectors.blog_configured():
            try:
                data = validated_query(PostsQuerySerializer, request)
            except ValidationError:
                data = None  # PostsView answers it, with its errors
            if data is not None and data["cache"] != "false":
                answer = selectors.posts_page_cached(PostsQuerySerializer.query(data))
                if answer is not None:
                    return _served(request, answer)
        return view(request)

    return posts


POST_READ_SCHEMA = {
    "parameters": [PostQuerySerializer, IF_NONE_MATCH, *READ_HEADERS],
    "responses": {200: PostDetailSerializer, 304: None, 400: ERROR, 404: ERROR, 429: ERROR, 503: ERROR},
}


class PostDetailView(BlogReadView):
    @extend_schema(
        operation_id="blog_post_detail",
        parameters=[
            OpenApiParameter("slug", {"type": "string", "pattern": f"^{SLUG.pattern}$"}, OpenApiParameter.PATH),
            *POST_READ_SCHEMA["parameters"],
        ],
        responses=POST_READ_SCHEMA["responses"],
        description="One published post by slug, its content sanitized. Unknown slug: 404 `post_not_found`.",
    )
    def get(self, request, slug):
        data = validated_query(PostQuerySerializer, request)
        if not SLUG.fullmatch(slug):
            raise ValidationError({"slug": ["A slug is 1–200 letters, digits, or - _ . ~ %."]})
        if not selectors.blog_configured():
            raise BlogNotConfigured()
        refresh = self.wants_refresh(request, data)
        return self.answer(request, selectors.post_by_slug(slug, refresh=refresh, admit=self.admit_upstream))


# --- purge -------------------------------------------------------------------------------------------


class PurgeUnavailable(APIException):
    status_code = 503
    default_detail = "The cache cannot be reached: nothing was purged; try again shortly."
    default_code = "cache_unavailable"


class SignatureRefused(APIException):
    status_code = 401
    default_detail = "Invalid, expired or missing webhook signature."
    default_code = "invalid_signature"


PURGE_HEADERS = [
    OpenApiParameter("X-Cache-Api-Key", OpenApiTypes.STR, OpenApiParameter.HEADER,
                     description="BLOG_CACHE_API_KEY. Not needed with a valid Standard Webhooks signature."),
    OpenApiParameter("webhook-id", OpenApiTypes.STR, OpenApiParameter.HEADER),
    OpenApiParameter("webhook-timestamp", OpenApiTypes.STR, OpenApiParameter.HEADER),
    OpenApiParameter("webhook-signature", OpenApiTypes.STR, OpenApiParameter.HEADER,
                     description="Standard Webhooks signature over the body (BLOG_PURGE_SIGNING_SECRET)."),
]  # fmt: skip
PURGE_SCHEMA = {
    "request": None,
    "parameters": PURGE_HEADERS,
    "responses": {200: PurgeResultSerializer, 401: ERROR, 404: ERROR, 413: ERROR, 429: ERROR, 503: ERROR},
    "description": "Empties the posts cache in one step (a new generation in every key). Guarded by "
    "X-Cache-Api-Key or, when BLOG_PURGE_SIGNING_SECRET is set, a Standard Webhooks signature. "
    "404 while neither is configured.",
}


class PurgeView(APIView):
    throttle_classes = [ScopedRateThrottle]
    throttle_scope = "blog_purge"

    def purge(self, request):
        if not settings.BLOG_CACHE_API_KEY and not settings.BLOG_PURGE_SIGNING_SECRET:
            raise NotFound()
        if int(request.META.get("CONTENT_LENGTH") or 0) > PURGE_MAX_BODY_BYTES:
            raise PayloadTooLarge()
        try:
            webhook_id = services.purge_webhook_id(request.body, request.headers)
        except services.InvalidSignature as exc:
            raise SignatureRefused() from exc
        if webhook_id is None:
            header_secret_require(request, "X-Cache-Api-Key", settings.BLOG_CACHE_API_KEY)
        actor = "api-key" if webhook_id is None else "signed-webhook"
        try:
            result = services.blog_cache_purge(actor=actor, webhook_id=webhook_id)
        except posts_cache.CACHE_ERRORS as exc:
            raise PurgeUnavailable() from exc
        return Response({"purged": result.purged, "generation": result.generation,
                         "previousGeneration": result.previous_generation, "scope": "posts"})  # fmt: skip


class PurgeDeleteView(PurgeView):
    @extend_schema(operation_id="blog_cache_purge", **PURGE_SCHEMA)
    def delete(self, request):
        return self.purge(request)

    @extend_schema(
        operation_id="blog_post_cache",
        description="The post whose slug is `cache`: this path is matched before /api/posts/{slug}.",
        **POST_READ_SCHEMA,
    )
    def get(self, request):
        return PostDetailView.as_view()(request._request, slug="cache")

    def get_throttles(self):
        return [] if self.request.method == "GET" else super().get_throttles()  # the post view has its own


class PurgeClearView(PurgeView):
    @extend_schema(operation_id="blog_cache_clear", **PURGE_SCHEMA)
    def post(self, request):
        return self.purge(request)
