import re

from django.conf import settings
from django.http import HttpResponse
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from chat import selectors as chat_selectors
from chat import services as chat_services
from foundation.api import PayloadTooLarge, error_body
from foundation.client_ip import USER_IP_SCHEMA, reported_user_ip, visitor_ip
from foundation.secrets import trusted_chat_client
from foundation.throttling import ScopedRateThrottle
from leadgen import intake, selectors
from leadgen.idempotency import (
    IdempotencyConflict,
    Replay,
    Saved,
    body_hash,
    idempotency_caller,
    idempotency_complete,
    idempotency_release,
    idempotency_reserve,
)
from leadgen.ratelimit import prototype_buckets_state
from leadgen.serializers import (
    LeadCreatedSerializer,
    LeadInputSerializer,
    LeadLookupInputSerializer,
    LeadLookupSerializer,
)

# A chat session id, or empty for none (how the header and the lookup's query parameter are read).
OPTIONAL_SESSION_ID_PATTERN = "^(?:" + chat_services.SESSION_ID_PATTERN.strip("^$") + ")?$"
CHAT_KEY_DESCRIPTION = "Key of the trusted sales-chat agent."
CHAT_KEY_HEADER = OpenApiParameter(
    "X-Chat-Api-Key", OpenApiTypes.STR, OpenApiParameter.HEADER, description=CHAT_KEY_DESCRIPTION
)
ERROR = OpenApiResponse(description='`{"error": {"code", "message", "fields"?}}`')
USER_IP_HEADER = OpenApiParameter(
    "X-User-IP", USER_IP_SCHEMA, OpenApiParameter.HEADER, description="Chat agent only: the visitor's address."
)


def prototype_state(lead) -> dict | None:
    """The new lead's prototype; a lead that gets none costs no query."""
    prototype = selectors.lead_prototype(lead=lead) if selectors.lead_gets_prototype(lead=lead) else None
    if prototype is None:
        return None
    prototype.refresh_from_db()  # the trusted chat path started it within this request
    return {
        "state": prototype.state,
        "progressUrl": reverse("prototype-page", args=[lead.public_id]),
        "error": prototype.last_error or None if prototype.state == "failed" else None,
    }


def chat_session_header(request) -> str:
    """X-Chat-Session-Id as the trusted chat agent sends it, validated like the body's sessionId."""
    session_id = request.headers.get("X-Chat-Session-Id", "")  # as the schema states it: no padding
    if session_id and not re.fullmatch(chat_services.SESSION_ID_PATTERN, session_id):
        raise ValidationError({"X-Chat-Session-Id": ["Enter a valid chat session id."]})
    return session_id


def pipedrive_state(lead) -> dict:
    return {"status": lead.pipedrive_state, "leadId": lead.pipedrive_lead_id or None}


class LeadCreateView(APIView):
    throttle_classes = [ScopedRateThrottle]
    throttle_scope = "leads"
    IDEMPOTENCY_SCOPE = "leads.create"

    @extend_schema(
        operation_id="leads_create",
        request=LeadInputSerializer,
        parameters=[
            CHAT_KEY_HEADER,
            USER_IP_HEADER,
            OpenApiParameter(
                "Idempotency-Key",
                OpenApiTypes.STR,
                OpenApiParameter.HEADER,
                description="The same key and body again within 24 h replays the first answer, byte for byte "
                "(`Idempotent-Replayed: true`). Keys are the caller's own: the chat agent's, or a visitor's network's.",
            ),
            OpenApiParameter(
                "X-Chat-Session-Id",
                {"type": "string", "pattern": OPTIONAL_SESSION_ID_PATTERN},
                OpenApiParameter.HEADER,
                description="Chat agent only.",
            ),
        ],
        responses={
            200: LeadCreatedSerializer,
            400: ERROR,
            401: ERROR,
            409: ERROR,
            413: ERROR,
            422: ERROR,
            429: ERROR,
            503: ERROR,
        },
        description="Submit the lead form. Spam and vendor pitches are answered like leads but go no further.",
    )
    def post(self, request):
        if int(request.META.get("CONTENT_LENGTH") or 0) > settings.LEADS_MAX_BODY_BYTES:
            raise PayloadTooLarge()
        trusted = trusted_chat_client(request, required=False)
        key = request.headers.get("Idempotency-Key", "").strip()[:255]
        caller = key and idempotency_caller(request, trusted_chat=trusted)  # a keyed hash: only when a key came
        if not caller:
            return self._create(request, trusted=trusted)
        owned = {"scope": self.IDEMPOTENCY_SCOPE, "caller": caller, "key": key}
        try:
            reserved = idempotency_reserve(**owned, request_hash=body_hash(request.body))
        except IdempotencyConflict as conflict:
            return Response(error_body(conflict.code, conflict.message), status=conflict.status)
        if isinstance(reserved, Replay):
            response = HttpResponse(reserved.content, status=reserved.status, content_type=reserved.content_type)
            response["Idempotent-Replayed"] = "true"
            return response
        try:
            if isinstance(reserved, Saved):  # the first request saved this lead, then died before answering
                answer = self._created(selectors.lead_get(lead_id=reserved.lead_id))
            else:
                answer = self._create(request, trusted=trusted, reservation=owned)
            # Rendered here, not on the way out, so that the bytes kept are the bytes sent.
            response = self.finalize_response(request, answer).render()
        except BaseException:
            idempotency_release(**owned)
            raise
        idempotency_complete(
            **owned, status=response.status_code, content=response.content, content_type=response["Content-Type"]
        )
        return response

    def _create(self, request, *, trusted: bool, reservation: dict | None = None) -> Response:
        serializer = LeadInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        fields = dict(serializer.validated_data)
        recaptcha_token = fields.pop("recaptchaToken", "")
        header_session_id = chat_session_header(request)  # checked even when the body names the session
        chat_session_id = fields.pop("sessionId", "") or header_session_id
        try:
            lead = intake.lead_intake(
                fields=fields,
                client_ip=visitor_ip(request, trusted_chat=trusted),
                trusted_chat=trusted,
                recaptcha_token=recaptcha_token,
                chat_session_id=chat_session_id if trusted else "",
                reservation=reservation,
            )
        except intake.IntakeRefused as refused:
            headers = {"Retry-After": str(refused.retry_after)} if refused.retry_after else {}
            return Response(error_body(refused.code, refused.message), status=refused.status, headers=headers)
        return self._created(lead)

    @staticmethod
    def _created(lead) -> Response:
        body = {
            "leadId": lead.public_id,
            "previewUrl": lead.preview_url or None,
            "pipedrive": pipedrive_state(lead),
            "prototype": prototype_state(lead),
        }
        return Response(LeadCreatedSerializer(body).data)


class LeadLookupView(APIView):
    throttle_classes = [ScopedRateThrottle]
    throttle_scope = "lookup"

    @extend_schema(
        operation_id="leads_lookup",
        parameters=[
            OpenApiParameter(
                "X-Chat-Api-Key",
                OpenApiTypes.STR,
                OpenApiParameter.HEADER,
                required=True,
                description=CHAT_KEY_DESCRIPTION,
            ),
            USER_IP_HEADER,
            OpenApiParameter("email", OpenApiTypes.EMAIL, required=True),
            OpenApiParameter(
                "sessionId",
                {"type": "string", "pattern": OPTIONAL_SESSION_ID_PATTERN},
                description="Chat session, to find the visitor's IP; empty means none.",
            ),
        ],
        responses={200: LeadLookupSerializer, 400: ERROR, 401: ERROR, 429: ERROR},
        description="For the trusted chat agent: the visitor's latest lead and prototype rate-limit state.",
    )
    def get(self, request):
        trusted_chat_client(request, required=True)
        repeated = sorted(name for name in request.query_params if len(request.query_params.getlist(name)) > 1)
        if repeated:  # the schema takes each parameter once; silently using the last one would hide a mistake
            raise ValidationError({name: ["Give this parameter once."] for name in repeated})
        query = LeadLookupInputSerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        email = query.validated_data["email"]
        ip = reported_user_ip(request) or (
            chat_selectors.chat_session_client_ip(session_id=query.validated_data["sessionId"])
            if "sessionId" in query.validated_data
            else None
        )
        lead = selectors.lead_latest_for_email(email=email)
        buckets = prototype_buckets_state(email=email, ip=ip)
        body = {
            "found": lead is not None,
            "lead": {
                "leadId": lead.public_id,
                "status": lead.status,
                "serviceType": lead.service_type,
                "createdAt": lead.created_at,
                "previewUrl": lead.preview_url or None,
                "pipedrive": pipedrive_state(lead),
            }
            if lead
            else None,
            "rateLimit": {
                "email": _bucket_json(buckets["email"]),
                "ip": _bucket_json(buckets["ip"]) if "ip" in buckets else None,
            },
        }
        return Response(LeadLookupSerializer(body).data)


def _bucket_json(state) -> dict:
    return {"inProgress": state.in_progress, "used": state.used, "limit": state.limit, "retryAfter": state.retry_after}
