from django.urls import path

from sources.api import SourceWebhookView

urlpatterns = [
    # Any text, so that a malformed id gets the API's JSON 404 (the schema's), not the HTML one.
    path("api/sources/<str:public_id>/webhook", SourceWebhookView.as_view(), name="sources-webhook"),
]
