"""Blog endpoints: posts read through the cache, and the purge WordPress calls on publish."""

import contextlib
import functools

import structlog
from django.conf import settings
from django.core.cache import cache
from django.http import HttpResponse, HttpResponseNotModified, QueryDict
from django.utils.http import parse_etags
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import APIException, NotFound, ValidationError
from rest_framework.fields import empty
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from blog import cache as posts_cache
from blog import selectors, services
from blog.posts import LIST_FIELDS, SLUG, PostsQuery
from foundation.api import ExactPatternField, PayloadTooLarge
from foundation.secrets import header_secret_require
from foundation.throttling import ClientIpRateThrottle, ScopedRateThrottle

logger = structlog.get_logger(__name__)

ERROR = OpenApiResponse(description='`{"error": {"code", "message", "fields"?}}`')
MAX_PAGE = 1000
MAX_TERMS = 20
PURGE_MAX_BODY_BYTES = 64 * 1024
WEBHOOK_ID_SECONDS = 600  # a signed purge's id is remembered longer than the signature's 5-minute tolerance
CACHE_CONTROL = "public, max-age=0, must-revalidate"  # browsers and CDNs revalidate with the ETag: purges reach them
ORDERBY = ("date", "modified", "id", "title", "slug", "author", "relevance")


# --- query validation ----------------------------------------------------------------------------


# The lists as the schema states them, which is the whole check: comma-separated, no spaces, no empty items.
# Term ids are 1–999,999,999 (WordPress's are far below), at most MAX_TERMS of them. Blank (no filter) is
# the schema's other `oneOf` alternative, so the patterns do not match it.
TERM_IDS = rf"^[1-9][0-9]{{0,8}}(?:,[1-9][0-9]{{0,8}}){{0,{MAX_TERMS - 1}}}$"
FIELD_NAMES = "^(?:{0})(?:,(?:{0}))*$".format("|".join(LIST_FIELDS))


class TermIdsField(ExactPatternField):
    """Comma-separated term ids, as WordPress takes them; read as the sorted distinct ids."""

    def __init__(self, **kwargs):
        super().__init__(TERM_IDS, message=f"Give up to {MAX_TERMS} comma-separated term ids, e.g. 3,7.", **kwargs)

    def run_validation(self, data=empty):
        return tuple(sorted({int(part) for part in super().run_validation(data).split(",") if part}))


class FieldNamesField(ExactPatternField):
    """Comma-separated names of LIST_FIELDS; read in LIST_FIELDS' order."""

    def __init__(self, **kwargs):
        super().__init__(FIELD_NAMES, message=f"Give comma-separated names from: {', '.join(LIST_FIELDS)}.", **kwargs)

    def run_validation(self, data=empty):
        names = set(super().run_validation(data).split(","))
        return tuple(name for name in LIST_FIELDS if name in names)


class CacheParameterMixin:
    def get_fields(self):
        fields = super().get_fields()
        fields["cache"] = serializers.ChoiceField(
            choices=["true", "false"], default="true", help_text="`false` skips the cache and refreshes it."
        )
        return fields

    def to_internal_value(self, data):
        known = set(self.fields)
        unknown = {name: ["Unknown query parameter."] for name in data if name not in known}
        repeated = {name: ["Give this parameter once."] for name in known if len(data.getlist(name)) > 1}
        # DRF reads an empty query value of an optional field as absent; here it is refused unless blank is allowed.
        blank = {
            name: ["Give a value or leave the parameter out."]
            for name, field in self.fields.items()
            if data.get(name) == "" and not getattr(field, "allow_blank", False)
        }
        if unknown or repeated or blank:
            raise ValidationError({**unknown, **repeated, **blank})
        return super().to_internal_value(data)


class PostsQuerySerializer(CacheParameterMixin, serializers.Serializer):
    page = serializers.IntegerField(min_value=1, max_value=MAX_PAGE, default=1)
    per_page = serializers.IntegerField(min_value=1, max_value=100, default=10, help_text="Posts per page, 1–100.")
    search = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    # Blank: no filter.
    categories = TermIdsField(required=False, allow_blank=True, help_text="Category ids: 3,7.")
    tags = TermIdsField(required=False, allow_blank=True, help_text="Tag ids, comma-separated.")
    orderby = serializers.ChoiceField(choices=ORDERBY, default="date")
    order = serializers.ChoiceField(choices=["asc", "desc"], default="desc")

    def get_fields(self):
        fields = super().get_fields()
        # Leading underscores, as WordPress spells them, cannot be class attributes of a serializer.
        fields["_fields"] = FieldNamesField(
            max_length=400, required=False, allow_blank=True,
            help_text=f"Comma-separated subset of: {', '.join(LIST_FIELDS)}.",
        )  # fmt: skip
        fields["_embed"] = serializers.ChoiceField(
            choices=["1", "true"], required=False, allow_blank=True,
            help_text="Accepted for WordPress compatibility: author, image and categories are always included.",
        )  # fmt: skip
        return fields

    def validate(self, attrs):
        if attrs["orderby"] == "relevance" and not attrs["search"].strip():
            raise ValidationError({"orderby": ["Ordering by relevance needs a search term."]})
        return attrs

    @staticmethod
    def query(data: dict) -> PostsQuery:
        return PostsQuery(
            page=data["page"],
            per_page=data["per_page"],
            search=data["search"].strip(),
            categories=data.get("categories", ()),
            tags=data.get("tags", ()),
            orderby=data["orderby"],
            order=data["order"],
            fields=data.get("_fields", ()),
        )


class PostQuerySerializer(CacheParameterMixin, serializers.Serializer):
    pass


VALIDATION_CACHE_MAX_QUERY = 512


def validated_query(serializer_class, request) -> dict:
    """The validated query parameters, or a ValidationError.

    A serializer costs more CPU than the rest of a cache hit (it deep-copies its fields on
    every instantiation), and a site asks for the same few query strings over and over: the
    outcome for each short query string is kept per process, in a bounded LRU."""
    query_string = request.META.get("QUERY_STRING", "")
    if len(query_string) > VALIDATION_CACHE_MAX_QUERY:
        return _validate(serializer_class, request.query_params)
    items = tuple((name, tuple(values)) for name, values in request.query_params.lists())
    data, errors = _validate_cached(serializer_class, items)
    if errors:
        raise ValidationError(errors)
    return data


@functools.lru_cache(maxsize=1024)
def _validate_cached(serializer_class, items):
    data = QueryDict(mutable=True)
    for name, values in items:
        data.setlist(name, list(values))
    try:
        return _validate(serializer_class, data), None
    except ValidationError as exc:
        return None, exc.detail


def _validate(serializer_class, data) -> dict:
    params = serializer_class(data=data)
    params.is_valid(raise_exception=True)
    return dict(params.validated_data)


# --- schema of the answers (documentation; the bytes come from blog.posts) ---------------------


class CategorySerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField(allow_null=True)
    slug = serializers.CharField(allow_null=True)


class PostSummarySerializer(serializers.Serializer):
    id = serializers.IntegerField(required=False, allow_null=True)
    slug = serializers.CharField(required=False)
    title = serializers.CharField(required=False, help_text="Plain text (HTML entities kept).")
    excerpt = serializers.CharField(required=False, help_text="Sanitized HTML.")
    date = serializers.CharField(required=False, allow_null=True)
    modified = serializers.CharField(required=False, allow_null=True)
    authorName = serializers.CharField(required=False, allow_null=True)  # noqa: N815
    categories = CategorySerializer(many=True, required=False)
    featuredImageUrl = serializers.CharField(required=False, allow_null=True)  # noqa: N815
    detailUrl = serializers.CharField(required=False, allow_null=True, help_text="Our URL of the post.")  # noqa: N815


class PostsPageSerializer(serializers.Serializer):
    posts = PostSummarySerializer(many=True)
    page = serializers.IntegerField()
    perPage = serializers.IntegerField()  # noqa: N815
    total = serializers.IntegerField()
    totalPages = serializers.IntegerField()  # noqa: N815


class PostDetailSerializer(PostSummarySerializer):
    content = serializers.CharField(help_text="Sanitized HTML.")


class PurgeResultSerializer(serializers.Serializer):
    purged = serializers.BooleanField(help_text="False for a signed purge already applied (same webhook-id).")
    generation = serializers.IntegerField(help_text="The generation every cache key now carries.")
    previousGeneration = serializers.IntegerField(allow_null=True)  # noqa: N815
    scope = serializers.CharField(help_text="What became unreachable: every cached posts answer.")


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
        entry = answer.entry
        if entry is None:
            raise BlogUnavailable()
        headers = {"X-Cache": answer.outcome, "ETag": entry.etag, "Cache-Control": CACHE_CONTROL}
        if answer.outcome == "stale":
            headers["Warning"] = '110 - "Response is Stale"'
        if entry.status == 200 and _matches(request.headers.get("If-None-Match"), entry.etag):
            response = HttpResponseNotModified()
        else:
            response = HttpResponse(entry.body, status=entry.status, content_type="application/json")
            headers.update(entry.headers)
        for name, value in headers.items():
            response[name] = value
        return response

    def handle_exception(self, exc):
        response = super().handle_exception(exc)
        response.setdefault("X-Cache", "miss")  # every answer says whether it came from the cache
        if isinstance(exc, BlogUnavailable):
            response["Retry-After"] = "30"
        return response


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


def _matches(if_none_match: str | None, etag: str) -> bool:
    if not if_none_match:
        return False
    tags = parse_etags(if_none_match)
    return "*" in tags or etag in tags or f"W/{etag}" in tags


# --- purge -------------------------------------------------------------------------------------------


class PurgeUnavailable(APIException):
    status_code = 503
    default_detail = "The cache cannot be reached: nothing was purged; try again shortly."
    default_code = "cache_unavailable"


class InvalidSignature(APIException):
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
        webhook_id = _verified_webhook_id(request)
        if webhook_id is None:
            header_secret_require(request, "X-Cache-Api-Key", settings.BLOG_CACHE_API_KEY)
            actor = "api-key"
        elif not cache.add(f"blog:purge-webhook:{webhook_id}", 1, timeout=WEBHOOK_ID_SECONDS):
            # The same signed message again (a retry after a lost answer): the cache was emptied already.
            return Response({"purged": False, "generation": selectors.cache_generation(),
                             "previousGeneration": None, "scope": "posts"})  # fmt: skip
        else:
            actor = "signed-webhook"
        try:
            result = services.blog_cache_purge(actor=actor)
        except posts_cache.CACHE_ERRORS as exc:
            if webhook_id is not None:  # not applied: the sender's retry of this message must purge
                with contextlib.suppress(*posts_cache.CACHE_ERRORS):
                    cache.delete(f"blog:purge-webhook:{webhook_id}")
            raise PurgeUnavailable() from exc
        return Response({"purged": True, "generation": result.generation,
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


def _verified_webhook_id(request) -> str | None:
    """The webhook-id of a request with a valid signature; None when it carries no signature (or signing is off)."""
    secret = settings.BLOG_PURGE_SIGNING_SECRET
    if not secret or "webhook-signature" not in request.headers:
        return None
    try:
        Webhook(secret).verify(request.body, dict(request.headers), json_parse=False)
    except (WebhookVerificationError, ValueError) as exc:
        logger.info("blog_purge_signature_refused", reason=str(exc)[:100])
        raise InvalidSignature() from exc
    return request.headers["webhook-id"][:200]
