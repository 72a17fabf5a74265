"""The project's URLs plus `POST /bench/minimal-relay`, the floor of the chat benchmark."""

from django.urls import path

from bench.chat.floor import minimal_relay
from config.urls import urlpatterns as project_urlpatterns

urlpatterns = [path("bench/minimal-relay", minimal_relay), *project_urlpatterns]
