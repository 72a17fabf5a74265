import structlog
from django.http import JsonResponse

from foundation.api import error_body
from foundation.parsers import text_refusal


class RequestIdHeaderMiddleware:
    """Echo the request id bound by django-structlog so clients can quote it.

    Sync only, like the whole middleware chain under daphne (config/asgi_handler.py).
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        request_id = structlog.contextvars.get_contextvars().get("request_id")
        if request_id:
            response["X-Request-ID"] = request_id
        return response


class UnstorableTextMiddleware:
    """Refuses (400) a request whose path, query or headers hold text PostgreSQL cannot store, before any
    view or middleware after it reads them: the one check of every URL, DRF's views or not. JSON bodies
    are checked by the parser (foundation.parsers.JSONParser)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        fields = {}
        for name, values in request.GET.lists():
            for text in (name, *values):
                _refuse(fields, name, text)
        for name, value in request.headers.items():
            _refuse(fields, name, value)
        return _refusal(fields) if fields else self.get_response(request)

    def process_view(self, request, view_func, view_args, view_kwargs):
        fields = {}
        for name, value in view_kwargs.items():  # the path's parameters, by the names the URL gives them
            if isinstance(value, str):
                _refuse(fields, name, value)
        return _refusal(fields) if fields else None


def _refuse(fields: dict, name: str, text: str) -> None:
    if refusal := text_refusal(text):
        # A name that is itself refused is never echoed.
        fields.setdefault("non_field_errors" if text_refusal(name) else name, [refusal])


def _refusal(fields: dict) -> JsonResponse:
    code = next(iter(fields.values()))[0].code
    return JsonResponse(error_body(code, "Some fields are invalid.", fields=fields), status=400)
