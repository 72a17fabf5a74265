"""The blog API's query parameters, validated as the schema states them, and the schema of its answers.

The answers' bytes come from blog.posts (through the cache); the answer serializers here document them.
"""

import functools

from django.http import QueryDict
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.fields import empty

from blog.posts import LIST_FIELDS, PostsQuery
from foundation.api import ExactPatternField

MAX_PAGE = 1000
MAX_TERMS = 20
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
        return _validate(serializer_class, request.GET)
    data, errors = _validate_cached(serializer_class, query_string)
    if errors:
        raise ValidationError(errors)
    return data


@functools.lru_cache(maxsize=1024)
def _validate_cached(serializer_class, query_string: str):
    try:
        return _validate(serializer_class, QueryDict(query_string)), None
    except ValidationError as exc:
        return None, exc.detail


def _validate(serializer_class, data) -> dict:
    params = serializer_class(data=data)
    params.is_valid(raise_exception=True)
    return dict(params.validated_data)


# --- schema of the answers ------------------------------------------------------------------------


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
