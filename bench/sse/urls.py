"""The project's URLs plus `GET /bench/relay/<chat_id>`, the baseline of the SSE benchmark."""

from django.urls import path

from bench.sse.relay import bare_relay
from config.urls import urlpatterns as project_urlpatterns

urlpatterns = [path("bench/relay/<str:chat_id>", bare_relay), *project_urlpatterns]
