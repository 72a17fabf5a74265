"""The progress stream in the OpenAPI schema.

`generate_stream` is an async Django view (DRF views cannot stream
asynchronously), which drf-spectacular cannot inspect; as for the chat stream,
the view carries a DRF view class that only describes it. OpenAPI 3.0 cannot
type the JSON inside an event's `data` line: the schema types the events (id,
name, data) and the description gives each event's `data` shape, with an
example stream.
"""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.views import APIView

from prototypes.models import Prototype

STATES = ", ".join(f"`{state.value}`" for state in Prototype.State)

DESCRIPTION = f"""\
The live progress of the lead's AI prototype as Server-Sent Events. Opening it starts the generation if \
nobody has (one generation per lead, ever); closing it stops nothing: the generation goes on and a later \
stream (or the email) shows the outcome.

Every event has an `id` (1, 2, 3… per prototype), an `event` name and one JSON `data` line:

| event | data | when |
| --- | --- | --- |
| `progress` | `{{state, status, title, step?}}`: `state` one of {STATES}; `status` what is happening, for the \
visitor; `title` the prototype's title (empty until known); `step` V0's steps so far, when V0 reported them | \
each step |
| `complete` | `{{state: "completed", previewUrl, title}}` | the end: the preview is ready |
| `error` | `{{state: "failed", message}}`: `message` is written for the visitor | the end: it failed |

A `: keep-alive` comment goes out after 15 s of silence. The stream ends after `complete` or `error` (or after \
30 minutes: reconnect with the last id). A reconnect with `Last-Event-ID` (or `?lastEventId=`) gets only the \
events after that id; an id that is not a number counts as none. A finished prototype's fresh stream sends \
`progress` and `complete` at once.
"""

EXAMPLE_STREAM = (
    "retry: 3000\n\n"
    'id: 1\nevent: progress\ndata: {"state":"generating","status":"Starting your prototype","title":"","step":0}\n\n'
    'id: 4\nevent: progress\ndata: {"state":"generating","status":"Writing app/page.tsx",'
    '"title":"Reporting automation","step":2}\n\n'
    ": keep-alive\n\n"
    'id: 9\nevent: complete\ndata: {"state":"completed","previewUrl":"https://demo-abc.vusercontent.net",'
    '"title":"Reporting automation"}\n\n'
)
# One event of the stream, as an SSE client parses it (schemathesis checks each against it).
EVENT_SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "pattern": "^[0-9]+$", "description": "1, 2, 3… per prototype."},
        "event": {"type": "string", "enum": ["progress", "complete", "error"]},
        "data": {"type": "string", "description": "One JSON object: its shape per event is in the description."},
    },
    "required": ["id", "event", "data"],
}
ERROR = '`{"error": {"code", "message"}}`'
LAST_EVENT_ID = "The last event id received: only later events are sent."


class GenerateStreamDoc(APIView):
    """Describes `prototypes.stream.generate_stream` in the schema; the URL routes to the async view."""

    @extend_schema(
        operation_id="leads_generate_stream",
        summary="Follow the lead's prototype being generated (SSE)",
        description=DESCRIPTION,
        tags=["leads"],
        auth=[],
        parameters=[
            OpenApiParameter(
                "lead_id", OpenApiTypes.UUID, OpenApiParameter.PATH, description="The lead's public id (`leadId`)."
            ),
            OpenApiParameter("Last-Event-ID", OpenApiTypes.STR, OpenApiParameter.HEADER, description=LAST_EVENT_ID),
            OpenApiParameter("lastEventId", OpenApiTypes.STR, description=f"{LAST_EVENT_ID} (polyfills)."),
        ],
        responses={
            (200, "text/event-stream"): OpenApiResponse(
                EVENT_SCHEMA,
                description="The event stream: `progress` events, then `complete` or `error` (see above).",
                examples=[OpenApiExample("A generation", value=EXAMPLE_STREAM, media_type="text/event-stream")],
            ),
            204: OpenApiResponse(description="The prototype has finished and nothing came after Last-Event-ID."),
            404: OpenApiResponse(description=f"No such lead, or the lead has no prototype: {ERROR}."),
            429: OpenApiResponse(
                description="Too many streams opened from this client, or too many open at once from it or on this "
                f"lead (`too_many_streams`); see Retry-After: {ERROR}."
            ),
        },
    )
    def get(self, request, lead_id):  # pragma: no cover - documentation only; the URL routes to generate_stream
        raise NotImplementedError
