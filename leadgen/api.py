import hmac
import ipaddress

from django.conf import settings
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from python_ipware import IpWare
from rest_framework.exceptions import APIException, ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from config.api import PayloadTooLarge, error_body
from config.throttling import ScopedRateThrottle
from leadgen import selectors, services
from leadgen.idempotency import (
    IdempotencyConflict,
    body_hash,
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

CHAT_KEY_DESCRIPTION = "Key of the trusted sales-chat agent."
CHAT_KEY_HEADER = OpenApiParameter(
    "X-Chat-Api-Key", OpenApiTypes.STR, OpenApiParameter.HEADER, description=CHAT_KEY_DESCRIPTION
)
ERROR = OpenApiResponse(description='`{"error": {"code", "message", "fields"?}}`')


class InvalidChatKey(APIException):
    # Not DRF's AuthenticationFailed: without an authentication class it turns into a 403.
    status_code = 401
    default_detail = "Invalid or missing X-Chat-Api-Key."
    default_code = "invalid_api_key"


def trusted_chat_client(request, *, required: bool) -> bool:
    """Constant-time check of X-Chat-Api-Key. A wrong key is refused, never silently downgraded."""
    supplied = request.headers.get("X-Chat-Api-Key")
    if supplied is None and not required:
        return False
    expected = settings.CHAT_API_KEY
    if not supplied or not expected or not hmac.compare_digest(supplied.encode(), expected.encode()):
        raise InvalidChatKey()
    return True


def reported_user_ip(request) -> str | None:
    """X-User-IP as the trusted chat agent sends it: the visitor's address, validated."""
    reported = request.headers.get("X-User-IP", "").strip()
    if not reported:
        return None
    try:
        return str(ipaddress.ip_address(reported))
    except ValueError as exc:
        raise ValidationError({"X-User-IP": ["Enter a valid IPv4 or IPv6 address."]}) from exc


def client_ip(request, *, trusted_chat: bool) -> str | None:
    """The visitor's IP: as the trusted chat agent reports it, else as seen through our proxies."""
    if trusted_chat and (reported := reported_user_ip(request)):
        return reported
    if settings.TRUSTED_PROXY_COUNT:
        ip, _ = IpWare(precedence=("X_FORWARDED_FOR",), proxy_count=settings.TRUSTED_PROXY_COUNT).get_client_ip(
            request.META
        )
        return str(ip) if ip else None
    return request.META.get("REMOTE_ADDR")


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
            OpenApiParameter("X-User-IP", OpenApiTypes.STR, OpenApiParameter.HEADER, description="Chat agent only."),
            OpenApiParameter("Idempotency-Key", OpenApiTypes.STR, OpenApiParameter.HEADER),
        ],
        responses={
            200: LeadCreatedSerializer,
            400: ERROR,
            401: ERROR,
            409: ERROR,
            413: ERROR,
            422: ERROR,
            429: ERROR,
        },
        description="Submit the lead form. Spam and vendor pitches are answered like leads but go no further.",
    )
    def post(self, request):
        if int(request.META.get("CONTENT_LENGTH") or 0) > settings.LEADS_MAX_BODY_BYTES:
            raise PayloadTooLarge()
        trusted = trusted_chat_client(request, required=False)
        key = request.headers.get("Idempotency-Key", "").strip()[:255]
        if key:
            try:
                replay = idempotency_reserve(
                    scope=self.IDEMPOTENCY_SCOPE, key=key, request_hash=body_hash(request.body)
                )
            except IdempotencyConflict as conflict:
                return Response(error_body(conflict.code, conflict.message), status=conflict.status)
            if replay:
                return Response(replay.body, status=replay.status, headers={"Idempotent-Replayed": "true"})
        try:
            response = self._create(request, trusted=trusted)
        except BaseException:
            if key:
                idempotency_release(scope=self.IDEMPOTENCY_SCOPE, key=key)
            raise
        if key:
            idempotency_complete(scope=self.IDEMPOTENCY_SCOPE, key=key, status=response.status_code, body=response.data)
        return response

    def _create(self, request, *, trusted: bool) -> Response:
        serializer = LeadInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        fields = dict(serializer.validated_data)
        recaptcha_token = fields.pop("recaptchaToken", "")
        try:
            lead = services.lead_intake(
                fields=fields,
                client_ip=client_ip(request, trusted_chat=trusted),
                trusted_chat=trusted,
                recaptcha_token=recaptcha_token,
            )
        except services.IntakeRefused as refused:
            headers = {"Retry-After": str(refused.retry_after)} if refused.retry_after else {}
            return Response(error_body(refused.code, refused.message), status=refused.status, headers=headers)
        body = {"leadId": lead.pk, "previewUrl": lead.preview_url or None, "pipedrive": pipedrive_state(lead)}
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
            OpenApiParameter("X-User-IP", OpenApiTypes.STR, OpenApiParameter.HEADER),
            OpenApiParameter("email", OpenApiTypes.EMAIL, required=True),
            OpenApiParameter("sessionId", OpenApiTypes.STR, description="Chat session, to find the visitor's IP."),
        ],
        responses={200: LeadLookupSerializer, 400: ERROR, 401: ERROR, 429: ERROR},
        description="For the trusted chat agent: the visitor's latest lead and prototype rate-limit state.",
    )
    def get(self, request):
        trusted_chat_client(request, required=True)
        query = LeadLookupInputSerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        email = query.validated_data["email"]
        ip = reported_user_ip(request) or (
            selectors.chat_session_ip(session_id=query.validated_data["sessionId"])
            if "sessionId" in query.validated_data
            else None
        )
        lead = selectors.lead_latest_for_email(email=email)
        buckets = prototype_buckets_state(email=email, ip=ip)
        body = {
            "found": lead is not None,
            "lead": {
                "leadId": lead.pk,
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
