import structlog
from asgiref.sync import iscoroutinefunction, markcoroutinefunction


class RequestIdHeaderMiddleware:
    """Echo the request id bound by django-structlog so clients can quote it.

    Sync and async capable: under ASGI (daphne) Django calls it on the event
    loop, without the thread hand-off a sync-only middleware costs every request.
    """

    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)

    def __call__(self, request):
        if iscoroutinefunction(self):
            return self.__acall__(request)
        return self._tag(self.get_response(request))

    async def __acall__(self, request):
        return self._tag(await self.get_response(request))

    @staticmethod
    def _tag(response):
        request_id = structlog.contextvars.get_contextvars().get("request_id")
        if request_id:
            response["X-Request-ID"] = request_id
        return response
