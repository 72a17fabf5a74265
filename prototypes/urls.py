from django.urls import path

from prototypes.stream import generate_stream
from prototypes.views import prototype_page

urlpatterns = [
    # Any text, so that a malformed id gets the stream's JSON 404 (the schema's), not the HTML one.
    path("api/leads/<str:lead_id>/generate-stream", generate_stream, name="prototype-stream"),
    path("prototype/<uuid:lead_id>/", prototype_page, name="prototype-page"),
]
