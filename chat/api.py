"""The sales chat's endpoints: the stream (an async view, SSE) and the transcript (DRF).

Two callers are let in. The trusted chat client sends `X-Chat-Api-Key` (and
may say the visitor's IP in `X-User-IP`); the widget page on our own site
sends `X-Chat-Widget-Token`, a signed token naming the one session it may
use, so that the key never reaches a browser.
"""

import asyncio

from django.conf import settings
from django.core import signing
from django.core.validators import RegexValidator
from django.db import InterfaceError, OperationalError
from django.http import JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import APIException, NotFound, ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from chat import admission, relay, selectors, services
from foundation.api import (
    DATABASE_RETRY_AFTER_SECONDS,
    WHITESPACE,
    DatabaseUnavailable,
    ExactPatternField,
    StrictCharField,
    error_body,
)
from foundation.batching import Batches
from foundation.client_ip import USER_IP_SCHEMA, visitor_ip
from foundation.parsers import json_body
from foundation.secrets import InvalidSecret, trusted_chat_client
from foundation.streams import held_while_sent, slot_give_back, too_many_streams
from foundation.throttling import ScopedRateThrottle
from integrations.agent import client as agent

WIDGET_TOKEN_SALT = "chat.widget"
WIDGET_TOKEN_HEADER = "X-Chat-Widget-Token"


class ChatStreamInputSerializer(serializers.Serializer):
    sessionId = ExactPatternField(services.SESSION_ID_PATTERN, message=services.SESSION_ID_INVALID, max_length=128)
    message = StrictCharField(
        min_length=1, max_length=4000, validators=[RegexValidator(rf"[^{WHITESPACE}]", message="Write a message.")]
    )

    def to_internal_value(self, data):
        if not isinstance(data, dict):
            raise ValidationError({"non_field_errors": ["Send a JSON object."]})
        return super().to_internal_value(data)


class ChatMessageSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    role = serializers.CharField()
    content = serializers.CharField()
    state = serializers.CharField()
    createdAt = serializers.DateTimeField(source="created_at")


class TranscriptSerializer(serializers.Serializer):
    sessionId = serializers.CharField(source="session_id")
    answering = serializers.BooleanField(help_text="An answer to the last message is still being read.")
    messages = ChatMessageSerializer(many=True)


# One instance validates every message: a serializer built per request copies its fields, about 100 µs of the
# event loop's time a chat (bench/chat). Nothing of a request is kept on it.
_CHAT_STREAM_INPUT = ChatStreamInputSerializer()


def _chat_stream_input(data) -> dict:
    try:
        return _CHAT_STREAM_INPUT.run_validation(data)
    except ValidationError:
        # The same failure, worded as is_valid words it (a body of JSON null, for one, as a non-field error).
        ChatStreamInputSerializer(data=data).is_valid(raise_exception=True)
        raise


def widget_token_issue(session_id: str) -> str:
    return signing.dumps(session_id, salt=WIDGET_TOKEN_SALT)


def widget_token_allows(token: str, session_id: str) -> bool:
    try:
        named = signing.loads(token, salt=WIDGET_TOKEN_SALT, max_age=settings.CHAT_WIDGET_TOKEN_MAX_AGE_SECONDS)
    except signing.BadSignature:
        return False
    return named == session_id


def caller_is_trusted(request, *, session_id: str) -> bool:
    """True for the trusted chat client, False for the widget of `session_id`; anyone else is refused (401)."""
    if request.headers.get("X-Chat-Api-Key") is not None:
        return trusted_chat_client(request, required=True)
    if widget_token_allows(request.headers.get(WIDGET_TOKEN_HEADER, ""), session_id):
        return False
    raise InvalidSecret()


def _admitted_lease(admitting: asyncio.Future):
    """The stream's lease of a done admission that let the chat in; None when it was refused or failed."""
    if admitting.cancelled() or admitting.exception() is not None:
        return None
    wait, lease = admitting.result()
    return lease if wait is None else None


def _admission_told(admitting: asyncio.Future, admitted: asyncio.Future, turn: asyncio.Future, chat_turn) -> None:
    """On the loop, once the chat's admission is known: the relay told whether it may connect, and an admitted
    chat's turn handed to the turns' batch (`turn` done with its outcome). A view already gone (`turn` let go)
    has nothing saved and nothing asked."""
    ok = not turn.done() and _admitted_lease(admitting) is not None
    admitted.set_result(ok)
    if ok:
        _turns.add(chat_turn).add_done_callback(lambda saving: _outcome_copy(saving, turn))
    elif not turn.done():
        turn.set_result(None)  # refused: nothing saved, nothing asked


def _outcome_copy(source: asyncio.Future, target: asyncio.Future) -> None:
    if target.done():  # let go by its view
        return
    if source.cancelled():
        target.cancel()
    elif source.exception() is not None:
        target.set_exception(source.exception())
    else:
        target.set_result(source.result())


def _slot_give_back(admitting: asyncio.Future) -> None:
    if (lease := _admitted_lease(admitting)) is not None:
        slot_give_back(lease)


# The chats starting while the previous batch is handled go together (chat.relay says why), on two threads: the
# admissions (one pipelined round trip to Redis), then the admitted turns (one statement). Apart, so that a
# batch's admissions never wait for the statement of the batch before: the agent's connections open as soon as
# Redis answers. A session's turns go one per batch: one upsert cannot touch a row twice.
_admissions = Batches("chat-admissions", admission.admissions_run)
_turns = Batches("chat-turns", services.chat_turns_start, key=lambda turn: turn.session_id)


def _error(exc: APIException) -> JsonResponse:
    if isinstance(exc, ValidationError):
        body = error_body("invalid", "Some fields are invalid.", fields=exc.detail)
    else:
        body = error_body(exc.get_codes() if isinstance(exc.get_codes(), str) else "error", str(exc.detail))
    return JsonResponse(body, status=exc.status_code)


# One event of the stream as an SSE client reads it (what schemathesis checks each event against). OpenAPI 3.0
# cannot type the JSON in `data`: the response's description gives its shape per event.
STREAM_EVENT_SCHEMA = {
    "type": "object",
    "properties": {
        "event": {"type": "string", "enum": ["token", "done", "error"]},
        "data": {"type": "string", "description": "One JSON object: its shape per event is in the description."},
    },
    "required": ["event", "data"],
    "additionalProperties": False,
}


class ChatStreamDoc(APIView):
    """Describes `chat_stream` (an async Django view, which drf-spectacular cannot inspect) in the schema."""

    @extend_schema(
        operation_id="chat_stream",
        request=ChatStreamInputSerializer,
        parameters=[
            OpenApiParameter("X-Chat-Api-Key", OpenApiTypes.STR, OpenApiParameter.HEADER),
            OpenApiParameter(WIDGET_TOKEN_HEADER, OpenApiTypes.STR, OpenApiParameter.HEADER),
            OpenApiParameter("X-User-IP", USER_IP_SCHEMA, OpenApiParameter.HEADER, description="Chat key only."),
        ],
        responses={
            (200, "text/event-stream"): OpenApiResponse(
                STREAM_EVENT_SCHEMA,
                description=(
                    "Server-sent events: `token` `{content}` for each piece of the answer as the agent writes it, "
                    "then either `done` `{messageId, state, content}` with the full answer, or `error` "
                    "`{code, message, messageId?, state}` when the agent failed (what it said so far is kept as "
                    "a partial message). Comment lines keep a quiet stream open."
                ),
            ),
            400: OpenApiResponse(description='`{"error": {"code", "message", "fields"}}`'),
            401: OpenApiResponse(description="Missing or wrong X-Chat-Api-Key or widget token."),
            413: OpenApiResponse(description="Body too large."),
            429: OpenApiResponse(
                description="Too many messages from this session or IP, or too many answers streaming to them at "
                "once (`too_many_streams`); see Retry-After."
            ),
            503: OpenApiResponse(description="No agent is configured, or the database is unavailable (Retry-After)."),
        },
        description="Send the visitor's message to the sales agent and stream its answer back.",
    )
    def post(self, request):  # pragma: no cover - documentation only; the URL routes to chat_stream
        raise NotImplementedError


@csrf_exempt  # authenticated by a header, never by a cookie
async def chat_stream(request):
    if request.method != "POST":
        return JsonResponse(error_body("method_not_allowed", "Use POST."), status=405, headers={"Allow": "POST"})
    # Checked again on the body itself: a chunked request has no Content-Length.
    if int(request.META.get("CONTENT_LENGTH") or 0) > settings.CHAT_MAX_BODY_BYTES or (
        len(request.body) > settings.CHAT_MAX_BODY_BYTES
    ):
        return JsonResponse(error_body("too_large", "Request body is too large."), status=413)
    try:
        data = json_body(request.body or b"null")
        session_id = data.get("sessionId") if isinstance(data, dict) else None
        trusted = caller_is_trusted(request, session_id=session_id if isinstance(session_id, str) else "")
        valid = _chat_stream_input(data)
        ip = visitor_ip(request, trusted_chat=trusted)
    except APIException as exc:
        return _error(exc)
    session_id, message = valid["sessionId"], valid["message"]

    client = agent.client_from_settings()
    if client is None:
        return JsonResponse(error_body("not_configured", "The sales chat is not available."), status=503)

    loop = asyncio.get_running_loop()
    admitting = _admissions.add(admission.admission_for(session_id=session_id, ip=ip))
    admitted, turn = loop.create_future(), loop.create_future()
    chat_turn = services.Turn(session_id, ip, message)
    admitting.add_done_callback(lambda _: _admission_told(admitting, admitted, turn, chat_turn))
    frames = relay.relay_start(
        client=client, admitted=admitted, turn=turn, session_id=session_id, query=message, user_ip=ip
    )
    try:
        # Shielded: the admission's outcome (the slot it may take) outlives a view cancelled meanwhile.
        wait, lease = await asyncio.shield(admitting)
        if wait is None and lease is not None:
            await turn
    except BaseException as exc:
        # Nothing will be streamed: the turn let go (the agent not asked), the slot given back once taken.
        turn.cancel()
        admitting.add_done_callback(lambda _: _slot_give_back(admitting))
        if not isinstance(exc, OperationalError | InterfaceError):
            raise
        # The database is down: nothing saved, the agent not asked, the widget may try again.
        response = _error(DatabaseUnavailable())
        response["Retry-After"] = str(DATABASE_RETRY_AFTER_SECONDS)
        return response
    if wait is not None:
        return JsonResponse(
            error_body("throttled", "Too many messages; wait a moment."), status=429, headers={"Retry-After": str(wait)}
        )
    if lease is None:
        return too_many_streams()
    return StreamingHttpResponse(
        held_while_sent(relay.sse_frames(frames), lease),
        content_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


# drf-spectacular lists a URL whose view carries a DRF view class: this one describes chat_stream.
chat_stream.cls = ChatStreamDoc
chat_stream.initkwargs = {}


class TranscriptView(APIView):
    throttle_classes = [ScopedRateThrottle]
    throttle_scope = "chat_transcript"

    @extend_schema(
        operation_id="chat_transcript",
        parameters=[
            OpenApiParameter("X-Chat-Api-Key", OpenApiTypes.STR, OpenApiParameter.HEADER),
            OpenApiParameter(WIDGET_TOKEN_HEADER, OpenApiTypes.STR, OpenApiParameter.HEADER),
        ],
        responses={200: TranscriptSerializer, 401: OpenApiResponse(), 404: OpenApiResponse(), 429: OpenApiResponse()},
        description="What was said in a chat session, oldest first, so a widget that reconnects can show it.",
    )
    def get(self, request, session_id):
        caller_is_trusted(request, session_id=session_id)
        transcript = selectors.chat_transcript(session_id=session_id)
        if transcript is None:
            raise NotFound("No such chat session.")
        return Response(TranscriptSerializer(transcript).data)
