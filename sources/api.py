"""Each inbound source's webhook URL: a platform POSTs its leads there; Facebook GETs it to subscribe."""

from django.conf import settings
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import APIException, NotFound, PermissionDenied
from rest_framework.response import Response
from rest_framework.views import APIView

from foundation.api import PayloadTooLarge, error_body
from foundation.throttling import ClientIpRateThrottle
from sources import platforms, selectors, services
from sources.models import InboundRequest, InboundSource

ERROR = OpenApiResponse(description='`{"error": {"code", "message", "fields"?}}`')
PUBLIC_ID = OpenApiParameter(
    "public_id", OpenApiTypes.UUID, OpenApiParameter.PATH, description="The source's id, shown in its admin page."
)
Outcome = InboundRequest.Outcome
KEPT_FOR_REVIEW = {
    Outcome.UNREADABLE: "The request could not be read as this platform's leads; it is kept for review.",
    Outcome.INVALID: "The lead's fields are invalid; the request is kept for review.",
}


class InvalidSignature(APIException):
    status_code = 401
    default_detail = "Invalid, expired or missing signature."
    default_code = "invalid_signature"


class SourceThrottle(ClientIpRateThrottle):
    scope = "sources"


class WebhookReceivedSerializer(serializers.Serializer):
    received = serializers.IntegerField(help_text="Leads the request held.")
    leads = serializers.ListField(
        child=serializers.UUIDField(), help_text="The leads it made, or found made already (a platform's retry)."
    )


class SourceWebhookView(APIView):
    throttle_classes = [SourceThrottle]

    @extend_schema(
        operation_id="sources_webhook_receive",
        parameters=[PUBLIC_ID],
        request={"application/json": OpenApiTypes.OBJECT},
        responses={
            200: WebhookReceivedSerializer,
            202: OpenApiResponse(WebhookReceivedSerializer, description="Facebook: the leads are being fetched."),
            401: ERROR,
            404: ERROR,
            413: ERROR,
            422: ERROR,
            429: ERROR,
        },
        description="A platform's leads, signed as the platform signs (docs/sources.md). 401 and nothing kept "
        "but the fact on a bad or missing signature; 422 with per-field errors when the leads cannot be read or "
        "are invalid (the request is kept, to replay once the mapping is fixed). A platform's retry of a lead "
        "makes no second lead. Unknown or inactive source: 404.",
    )
    def post(self, request, public_id):
        source = _source(public_id)
        if int(request.META.get("CONTENT_LENGTH") or 0) > settings.SOURCES_MAX_BODY_BYTES:
            raise PayloadTooLarge()
        try:
            logged = services.request_receive(source=source, headers=request.headers, body=request.body)
        except platforms.SignatureRefused as refused:
            raise InvalidSignature() from refused
        if logged.outcome in KEPT_FOR_REVIEW:
            return Response(error_body(logged.outcome, KEPT_FOR_REVIEW[logged.outcome], logged.errors), status=422)
        results = logged.results.values()
        body = {"received": len(results), "leads": [result["lead"] for result in results if result.get("lead")]}
        status = 202 if logged.outcome == Outcome.PENDING_FETCH else 200
        return Response(WebhookReceivedSerializer(body).data, status=status)

    @extend_schema(
        operation_id="sources_webhook_verify",
        parameters=[
            PUBLIC_ID,
            OpenApiParameter("hub.mode", OpenApiTypes.STR, description="`subscribe`"),
            OpenApiParameter("hub.verify_token", OpenApiTypes.STR, description="The source's verify token."),
            OpenApiParameter("hub.challenge", OpenApiTypes.STR, description="Answered back when the token is right."),
        ],
        responses={
            (200, "text/plain"): OpenApiResponse(OpenApiTypes.STR, description="The challenge."),
            403: ERROR,
            404: ERROR,
            429: ERROR,
        },
        description="Facebook's subscription handshake: the challenge back when the verify token is the "
        "source's, else 403. Sources of other kinds: 404.",
    )
    def get(self, request, public_id):
        source = _source(public_id)
        if source.kind != InboundSource.Kind.FACEBOOK:
            raise NotFound()
        challenge = platforms.facebook_handshake(request.query_params, verify_token=source.verify_token)
        if challenge is None:
            raise PermissionDenied("The verify token is not this source's.")
        return HttpResponse(challenge, content_type="text/plain")


def _source(public_id: str) -> InboundSource:
    source = selectors.source_receiving(public_id=public_id)
    if source is None:
        raise NotFound()
    return source
