import structlog


class RequestIdHeaderMiddleware:
    """Echo the request id bound by django-structlog so clients can quote it.

    Sync only, like the whole middleware chain under daphne (config/handlers.py).
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        request_id = structlog.contextvars.get_contextvars().get("request_id")
        if request_id:
            response["X-Request-ID"] = request_id
        return response
