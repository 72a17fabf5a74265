"""Shared API behaviour: one JSON error shape, request ids, the schema and offline docs."""

import uuid

import pytest
from django.http import Http404
from django.urls import include, path
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView


class ExampleInput(serializers.Serializer):
    email = serializers.EmailField()
    name = serializers.CharField(max_length=5)


class ExampleView(APIView):
    def post(self, request):
        ExampleInput(data=request.data).is_valid(raise_exception=True)
        return Response({"ok": True})


class MissingView(APIView):
    def get(self, request):
        raise Http404("no such lead")


urlpatterns = [
    path("example", ExampleView.as_view()),
    path("missing", MissingView.as_view()),
    path("", include("config.urls")),
]


@pytest.mark.urls("tests.test_api_plumbing")
def test_validation_errors_list_every_field(client):
    response = client.post("/example", {"email": "nope", "name": "far too long"}, content_type="application/json")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid"
    assert set(error["fields"]) == {"email", "name"}
    assert "valid email" in error["fields"]["email"][0]


@pytest.mark.urls("tests.test_api_plumbing")
def test_malformed_json_is_a_clear_400(client):
    response = client.post("/example", "{not json", content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "parse_error"


@pytest.mark.urls("tests.test_api_plumbing")
def test_wrong_method_keeps_the_error_shape(client):
    response = client.get("/example")
    assert response.status_code == 405
    assert response.json()["error"]["code"] == "method_not_allowed"


@pytest.mark.urls("tests.test_api_plumbing")
def test_not_found_keeps_the_error_shape(client):
    response = client.get("/missing")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


@pytest.mark.urls("tests.test_api_plumbing")
def test_oversized_body_is_413_not_500(client, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024
    body = '{"email": "a@example.com", "name": "' + "x" * 4096 + '"}'
    response = client.post("/example", body, content_type="application/json")
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "too_large"


def test_every_response_carries_a_request_id(client):
    response = client.get("/healthz")
    assert uuid.UUID(response["X-Request-ID"])


@pytest.mark.django_db
def test_schema_and_offline_swagger_ui(client):
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert schema.status_code == 200
    assert schema.json()["openapi"].startswith("3.")
    docs = client.get("/api/docs/")
    assert docs.status_code == 200
    html = docs.content.decode()
    assert "swagger-ui" in html
    assert "cdn" not in html.lower() and "unpkg" not in html.lower(), "docs must work without internet"
