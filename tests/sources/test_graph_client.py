"""The Graph API client against the Graph stand-in, a real HTTP server answering as Meta's Graph API does."""

import subprocess
import sys

import pytest

from integrations.facebook.client import GraphClient, client_from_settings
from jobs import PermanentError, TransientError
from sources import platforms
from standins.graph_api import ACCESS_TOKEN, GraphApi, lead
from tests.conftest import free_port

LEADGEN_ID = "444444444444444"


@pytest.fixture
def graph():
    with GraphApi() as server:
        server.add(lead(LEADGEN_ID, {"full_name": "Ada Lovelace", "email": "ada@example.com", "services": ["A", "B"]}))
        yield server


def test_reads_a_leads_field_data_and_where_it_came_from(graph):
    found = GraphClient(graph.base_url, ACCESS_TOKEN).lead(LEADGEN_ID)

    assert found["id"] == LEADGEN_ID
    assert found["field_data"] == [
        {"name": "full_name", "values": ["Ada Lovelace"]},
        {"name": "email", "values": ["ada@example.com"]},
        {"name": "services", "values": ["A", "B"]},
    ]
    assert found["form_id"] == "555555555555555" and found["ad_id"] == "666666666666666"
    assert platforms.facebook_answers(found) == {
        "full_name": "Ada Lovelace",
        "email": "ada@example.com",
        "services": "A, B",
    }


def test_the_token_never_travels_in_the_url(graph):
    GraphClient(graph.base_url, ACCESS_TOKEN).lead(LEADGEN_ID)

    (target,) = graph.requests
    assert target.startswith(f"/v21.0/{LEADGEN_ID}?fields=") and ACCESS_TOKEN not in target


def test_a_wrong_token_is_permanent(graph):
    with pytest.raises(PermanentError, match="Graph error 190"):
        GraphClient(graph.base_url, "another-token").lead(LEADGEN_ID)


def test_no_token_fails_without_a_request(graph):
    with pytest.raises(PermanentError, match="no page access token"):
        GraphClient(graph.base_url, "").lead(LEADGEN_ID)

    assert graph.requests == []


def test_a_lead_graph_does_not_have_is_permanent(graph):
    with pytest.raises(PermanentError, match="Graph error 100/33"):
        GraphClient(graph.base_url, ACCESS_TOKEN).lead("123")


def test_an_id_that_is_not_a_graph_id_is_never_requested(graph):
    with pytest.raises(PermanentError):
        GraphClient(graph.base_url, ACCESS_TOKEN).lead("../me/accounts")

    assert graph.requests == []


def test_graph_down_is_transient_and_the_lead_is_read_once_it_is_back(graph):
    client = GraphClient(graph.base_url, ACCESS_TOKEN)
    graph.fail_next(2)

    for _ in range(2):
        with pytest.raises(TransientError, match="HTTP 500"):
            client.lead(LEADGEN_ID)
    assert client.lead(LEADGEN_ID)["id"] == LEADGEN_ID


def test_throttling_is_transient_though_graph_answers_400(graph):
    graph.throttle_next()

    with pytest.raises(TransientError, match="Graph error 4"):
        GraphClient(graph.base_url, ACCESS_TOKEN).lead(LEADGEN_ID)


@pytest.mark.parametrize("code", [17, 32, 613, 80001])
def test_a_rate_limit_code_is_transient_though_not_marked_so(httpserver, code):
    error = {"message": "Calls to this api have exceeded the rate limit.", "type": "OAuthException", "code": code}
    httpserver.expect_request(f"/v21.0/{LEADGEN_ID}").respond_with_json({"error": error}, status=400)

    with pytest.raises(TransientError, match=f"Graph error {code}"):
        GraphClient(httpserver.url_for("/v21.0"), ACCESS_TOKEN).lead(LEADGEN_ID)


def test_graph_unreachable_is_transient():
    with pytest.raises(TransientError):
        GraphClient(f"http://127.0.0.1:{free_port()}/v21.0", ACCESS_TOKEN).lead(LEADGEN_ID)


def test_an_app_that_requires_the_app_secret_gets_its_proof():
    with GraphApi(app_secret="app-secret") as graph:
        graph.add(lead(LEADGEN_ID))

        assert GraphClient(graph.base_url, ACCESS_TOKEN, app_secret="app-secret").lead(LEADGEN_ID)["id"] == LEADGEN_ID
        with pytest.raises(PermanentError, match="Graph error 100"):
            GraphClient(graph.base_url, ACCESS_TOKEN).lead(LEADGEN_ID)
        with pytest.raises(PermanentError, match="Graph error 100"):
            GraphClient(graph.base_url, ACCESS_TOKEN, app_secret="another-secret").lead(LEADGEN_ID)


def test_the_client_from_settings_reads_the_graph_url_setting(graph, settings):
    settings.FACEBOOK_GRAPH_URL = graph.base_url

    assert client_from_settings(ACCESS_TOKEN).lead(LEADGEN_ID)["id"] == LEADGEN_ID


@pytest.mark.slow
def test_the_stand_in_runs_alone_and_answers_any_lead():
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "standins.graph_api", "--port", str(port)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout.readline().strip() == f"Graph API stand-in at http://127.0.0.1:{port}/v21.0"

        found = GraphClient(f"http://127.0.0.1:{port}/v21.0", ACCESS_TOKEN).lead("123456789012345")

        assert platforms.facebook_answers(found)["email"] == "lead-123456789012345@example.com"
    finally:
        process.terminate()
        process.wait(timeout=10)
