"""The request-id middleware in both of Django's modes: sync (WSGI, test client) and async (daphne)."""

import uuid

from asgiref.sync import async_to_sync, iscoroutinefunction
from django.http import HttpResponse
from django.test import AsyncClient

from config.middleware import RequestIdHeaderMiddleware


def test_under_asgi_the_middleware_runs_on_the_event_loop_and_tags_the_response():
    response = async_to_sync(AsyncClient().get)("/healthz")
    assert response.status_code == 200
    assert uuid.UUID(response["X-Request-ID"])


def test_it_is_a_coroutine_function_only_around_an_async_handler():
    async def async_view(request):
        return HttpResponse("ok")

    def sync_view(request):
        return HttpResponse("ok")

    assert iscoroutinefunction(RequestIdHeaderMiddleware(async_view)), "Django then needs no thread hop for it"
    assert not iscoroutinefunction(RequestIdHeaderMiddleware(sync_view))
