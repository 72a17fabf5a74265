"""Capture endpoints (docs site, MCP server) and the internal sync triggers."""

from functools import partial

import structlog
from django.conf import settings
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    PolymorphicProxySerializer,
    extend_schema,
    inline_serializer,
)
from rest_framework import serializers
from rest_framework.exceptions import MethodNotAllowed, NotFound
from rest_framework.response import Response
from rest_framework.views import APIView

from docs_users import activity, sync
from docs_users.docs_auth import docs_session_sub
from docs_users.models import TrackedUser
from foundation.api import NOT_BLANK, BoundedEmailField, StrictCharField
from foundation.secrets import bearer_secret_require, header_secret_require
from foundation.throttling import RateThrottle, ScopedRateThrottle

logger = structlog.get_logger(__name__)

ERROR = OpenApiResponse(description='`{"error": {"code", "message", "fields"?}}`')
DOCS_ACTIVITY_MAX_BODY_BYTES = 4096


class DocsActivityInputSerializer(serializers.Serializer):
    path = StrictCharField(max_length=500, help_text="Path of the docs page viewed, e.g. /current/get-started/.")
    component = StrictCharField(max_length=100, required=False, allow_blank=True, help_text="Docs component.")
    searchTerm = StrictCharField(  # noqa: N815  (the docs site's JSON name)
        max_length=500, required=False, allow_blank=True, help_text="The search that led to the page, if any."
    )


class DocsSessionThrottle(RateThrottle):
    scope = "docs_activity"

    def get_cache_key(self, request, view):
        return self.cache_format % {"scope": self.scope, "ident": view.sub}


class DocsActivityView(APIView):
    """Page views of signed-in docs readers. Answers 204 to everything so it tells nothing about sessions."""

    @extend_schema(
        operation_id="docs_activity",
        request=DocsActivityInputSerializer,
        responses={204: None},
        description="Beacon from the docs site (same origin, session cookie). 204 whatever the body: anonymous "
        "calls, cross-site calls, malformed bodies and calls over the per-session rate are ignored. Like every "
        "operation, text PostgreSQL cannot store in the query, a header or the cookie is a 400 before this runs.",
    )
    def post(self, request):
        self.sub = docs_session_sub(request)
        if self.sub and self._acceptable(request):
            data = DocsActivityInputSerializer(data=request.data)
            if data.is_valid():
                activity.docs_page_view_record(
                    sub=self.sub,
                    path=data.validated_data["path"],
                    component=data.validated_data.get("component", ""),
                    search_term=data.validated_data.get("searchTerm", ""),
                )
        return Response(status=204)

    def _acceptable(self, request) -> bool:
        if int(request.META.get("CONTENT_LENGTH") or 0) > DOCS_ACTIVITY_MAX_BODY_BYTES:
            return False
        # The session cookie is SameSite=Lax, so another site cannot send it in a POST; browsers that
        # say where a request comes from are checked too.
        if request.headers.get("Sec-Fetch-Site", "same-origin") not in ("same-origin", "none"):
            return False
        return DocsSessionThrottle().allow_request(request, self)

    def handle_exception(self, exc):
        if isinstance(exc, MethodNotAllowed):
            return super().handle_exception(exc)
        # A body that is not JSON, or any other refusal of a POST, gets the same 204: the beacon reads nothing.
        logger.info("docs_activity_ignored", error=type(exc).__name__)
        return Response(status=204)


class McpEventInputSerializer(serializers.Serializer):
    TYPES = (("tool_call", "A tool call"), ("sign_in", "A sign-in through the MCP server"))

    type = serializers.ChoiceField(choices=TYPES, default="tool_call")
    sub = StrictCharField(
        max_length=255, validators=[NOT_BLANK], help_text="The identity provider's subject of the user."
    )
    userAgent = StrictCharField(max_length=500, required=False, allow_blank=True)  # noqa: N815
    tool = StrictCharField(
        max_length=100, required=False, validators=[NOT_BLANK], help_text="Tool name; required for a tool call."
    )
    timestamp = serializers.DateTimeField(required=False, help_text="When it happened; default: now.")
    context = StrictCharField(
        max_length=2000, required=False, allow_blank=True, help_text="The agent's stated intent, if it gave one."
    )
    email = BoundedEmailField(max_length=254, required=False, allow_blank=True)
    givenName = StrictCharField(max_length=150, required=False, allow_blank=True)  # noqa: N815
    familyName = StrictCharField(max_length=150, required=False, allow_blank=True)  # noqa: N815
    orgName = StrictCharField(max_length=200, required=False, allow_blank=True)  # noqa: N815

    def validate(self, attrs):
        if attrs["type"] == "tool_call" and not attrs.get("tool", "").strip():
            raise serializers.ValidationError({"tool": ["A tool call names its tool."]})
        # A clock running ahead must not push the retention clock into the future.
        attrs["timestamp"] = min(attrs.get("timestamp") or timezone.now(), timezone.now())
        return attrs


class McpToolCallEvent(McpEventInputSerializer):
    """For the schema: a tool call (the default type) names its tool."""

    type = serializers.ChoiceField(choices=McpEventInputSerializer.TYPES[:1], required=False)
    tool = StrictCharField(max_length=100, validators=[NOT_BLANK], help_text="Tool name.")


class McpSignInEvent(McpEventInputSerializer):
    """For the schema: a sign-in says so."""

    type = serializers.ChoiceField(choices=McpEventInputSerializer.TYPES[1:])


MCP_EVENT_SCHEMA = PolymorphicProxySerializer(
    component_name="McpEvent", serializers=[McpToolCallEvent, McpSignInEvent], resource_type_field_name=None
)


class McpEventsView(APIView):
    throttle_classes = [ScopedRateThrottle]
    throttle_scope = "mcp_events"

    @extend_schema(
        operation_id="tracking_mcp_events",
        request=MCP_EVENT_SCHEMA,
        parameters=[OpenApiParameter("X-Service-Key", OpenApiTypes.STR, OpenApiParameter.HEADER, required=True)],
        responses={204: None, 400: ERROR, 401: ERROR, 429: ERROR},
        description="The MCP server reports a user's sign-in or tool call. The agent context is stored capped "
        "and redacted before it is delivered anywhere.",
    )
    def post(self, request):
        header_secret_require(request, "X-Service-Key", settings.TRACKING_MCP_SERVICE_KEY)
        event = McpEventInputSerializer(data=request.data)
        event.is_valid(raise_exception=True)
        data = event.validated_data
        if data["type"] == "sign_in":
            activity.tracked_user_sign_in(
                sub=data["sub"],
                channel=TrackedUser.Channel.MCP,
                email=data.get("email", ""),
                given_name=data.get("givenName", ""),
                family_name=data.get("familyName", ""),
                org_name=data.get("orgName", ""),
                user_agent=data.get("userAgent", ""),
                at=data["timestamp"],
            )
        else:
            activity.mcp_tool_call_record(
                sub=data["sub"],
                tool=data["tool"],
                user_agent=data.get("userAgent", ""),
                context=data.get("context", ""),
                at=data["timestamp"],
            )
        return Response(status=204)


QUEUED = inline_serializer(
    "JobsQueued",
    {
        "jobs": inline_serializer(
            "JobQueued", {"jobId": serializers.IntegerField(), "key": serializers.CharField()}, many=True
        )
    },
)


class InternalTriggerView(APIView):
    """POST with `Authorization: Bearer CRM_INVOKE_SECRET` queues the jobs; off (404) while the secret is unset."""

    throttle_classes = [ScopedRateThrottle]
    throttle_scope = "internal_trigger"
    start = None  # set per URL: a function of no arguments that queues the job (or jobs)

    @extend_schema(responses={202: QUEUED, 401: ERROR, 404: ERROR, 429: ERROR}, request=None)
    def post(self, request):
        if not settings.CRM_INVOKE_SECRET:
            raise NotFound()
        bearer_secret_require(request, settings.CRM_INVOKE_SECRET)
        queued = self.start()
        queued = queued if isinstance(queued, list) else [queued]
        return Response({"jobs": [{"jobId": job.pk, "key": job.key} for job in queued]}, status=202)


class SyncTriggerView(InternalTriggerView):
    start = staticmethod(partial(sync.profile_sync_start, reason="invoke"))


class RetentionTriggerView(InternalTriggerView):
    start = staticmethod(sync.retention_start)
