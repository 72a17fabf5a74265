"""The MCP server's upstream clients against the Auth0 and Kapa stand-ins and a local docs site."""

import hashlib

import pytest

from integrations.auth0 import access_tokens
from integrations.auth0.access_tokens import AccessTokenVerifier, InvalidAccessToken, KeySetOutdated
from integrations.docs_site.client import DocsSiteClient, PageRefused, origin_of
from integrations.kapa.client import DocsChunk, KapaClient
from jobs import PermanentError, TransientError
from standins.auth0 import AUDIENCE, rsa_signing_key
from standins.kapa import API_KEY, PROJECT
from tests.docs_mcp.conftest import serve_docs_site


def test_a_token_is_checked_against_the_tenant_keys_fetched_once(auth0):
    verifier = AccessTokenVerifier(auth0.domain, audience=AUDIENCE)
    with pytest.raises(KeySetOutdated):
        verifier.verified_claims(auth0.mint("auth0|ada"), may_fetch=False)  # no I/O on the event loop
    assert verifier.verified_claims(auth0.mint("auth0|ada"))["sub"] == "auth0|ada"
    assert verifier.verified_claims(auth0.mint("auth0|ada"), may_fetch=False)["sub"] == "auth0|ada"
    assert auth0.jwks_requests == 1


def test_a_rotated_key_is_fetched_again_but_not_more_than_once_a_minute(auth0, monkeypatch):
    verifier = AccessTokenVerifier(auth0.domain, audience=AUDIENCE)
    verifier.verified_claims(auth0.mint("auth0|ada"))
    new_key = rsa_signing_key("tenant-key-2")
    auth0.keys.append(new_key)  # the tenant rotates: the new key is published beside the old one
    auth0.jwks_requests = 0
    with pytest.raises(InvalidAccessToken):  # within a minute of the last fetch: no new fetch
        verifier.verified_claims(auth0.mint("auth0|ada", key=new_key))
    monkeypatch.setattr(access_tokens, "JWKS_REFRESH_SECONDS", 0)
    assert verifier.verified_claims(auth0.mint("auth0|ada", key=new_key))["sub"] == "auth0|ada"
    assert auth0.jwks_requests == 1


@pytest.mark.parametrize(
    "overrides",
    [{"alg_none": True}, {"aud": "https://other.example.com/"}, {"exp": 1_700_000_000}, {"iss": "https://x.example/"}],
)
def test_tokens_that_fail_a_check_are_refused(auth0, overrides):
    verifier = AccessTokenVerifier(auth0.domain, audience=AUDIENCE)
    if overrides.pop("alg_none", False):
        token = "eyJhbGciOiJub25lIiwia2lkIjoidGVuYW50LWtleS0xIn0.eyJzdWIiOiJhdXRoMHxhZGEifQ."
    else:
        token = auth0.mint("auth0|ada", **overrides)
    with pytest.raises(InvalidAccessToken):
        verifier.verified_claims(token)


def test_an_unreachable_tenant_is_transient(auth0):
    verifier = AccessTokenVerifier("http://127.0.0.1:9", audience=AUDIENCE)
    with pytest.raises(TransientError):
        verifier.verified_claims(auth0.mint("auth0|ada"))


def test_kapa_search_reads_titles_from_the_breadcrumb_heading(kapa):
    client = KapaClient(kapa.origin, api_key=API_KEY, project_id=PROJECT)
    chunks = client.search("tls", limit=3)
    assert [chunk.title for chunk in chunks] == ["Result 1 for tls", "Result 2 for tls", "Result 3 for tls"]
    assert chunks[0].url == "https://docs.example.com/page-1"
    assert chunks[0].content.startswith("## Steps\n\nPassage 1 about tls.")
    assert kapa.bodies() == [{"query": "tls", "top_k": 3}]
    assert client.search("tls", limit=50)[-1].title == "Result 15 for tls"  # Kapa's top_k stops at 15
    assert kapa.bodies()[-1]["top_k"] == 15


def test_a_chunk_without_a_heading_is_titled_by_its_url(httpserver):
    httpserver.expect_request(f"/query/v1/projects/{PROJECT}/retrieval/").respond_with_json([
        {"source_url": "https://docs.example.com/faq", "content": "Plain text, no heading."},
        {"source_url": "", "content": "no URL: left out"},
        {"content": "no URL at all"},
    ])  # fmt: skip
    client = KapaClient(httpserver.url_for("/"), api_key=API_KEY, project_id=PROJECT)
    faq = "https://docs.example.com/faq"
    assert client.search("faq") == [DocsChunk(title=faq, url=faq, content="Plain text, no heading.")]


def test_kapa_ask_starts_a_thread_attributed_to_the_owner_id(kapa, settings):
    settings.KAPA_OWNER_SALT = "salt"
    client = KapaClient(kapa.origin, api_key=API_KEY, project_id=PROJECT, integration_id="int-mcp")
    answer = client.ask("auth0|ada", "How?")
    assert answer.answer == "To how?, set the option." and answer.uncertain is False
    assert answer.sources == [DocsChunk(title="Configuration", url="https://docs.example.com/config", content="")]
    owner = hashlib.sha256(b"saltauth0|ada").hexdigest()
    assert kapa.bodies() == [{"query": "How?", "user": {"unique_client_id": owner}, "integration_id": "int-mcp"}]
    assert len({client.ask("auth0|ada", "Again?").thread_id, answer.thread_id}) == 2  # a new thread each time


@pytest.mark.parametrize(
    ("key", "status", "error"),
    [("", 401, PermanentError), ("wrong-key", 401, PermanentError), (API_KEY, 400, PermanentError)],
)
def test_kapa_refusals_are_permanent(kapa, key, status, error):
    client = KapaClient(kapa.origin, api_key=key, project_id=PROJECT)
    with pytest.raises(error, match=str(status)):
        client.search("   ")
    assert len(kapa.requests) == 1


def test_kapa_throttling_and_outages_are_transient(httpserver):
    retrieval = f"/query/v1/projects/{PROJECT}/retrieval/"
    httpserver.expect_oneshot_request(retrieval).respond_with_json(
        {"detail": "Request was throttled. Expected available in 7 seconds."}, status=429, headers={"Retry-After": "7"}
    )
    httpserver.expect_oneshot_request(retrieval).respond_with_data("Bad Gateway", status=502)
    client = KapaClient(httpserver.url_for("/"), api_key=API_KEY, project_id=PROJECT)
    with pytest.raises(TransientError) as throttled:
        client.search("tls")
    assert throttled.value.retry_after == 7
    with pytest.raises(TransientError):
        client.search("tls")


def test_an_answer_of_another_shape_is_permanent(httpserver, settings):
    settings.KAPA_OWNER_SALT = "salt"
    httpserver.expect_request(f"/query/v1/projects/{PROJECT}/retrieval/").respond_with_json({"search_results": []})
    httpserver.expect_request(f"/query/v1/projects/{PROJECT}/chat/").respond_with_json({"thread_id": "t"})
    client = KapaClient(httpserver.url_for("/"), api_key=API_KEY, project_id=PROJECT)
    with pytest.raises(PermanentError, match="not a list"):
        client.search("tls")
    with pytest.raises(PermanentError, match="no answer"):
        client.ask("auth0|ada", "How?")


def test_docs_site_origins_are_exact(httpserver):
    serve_docs_site(httpserver)
    origin = httpserver.url_for("/").rstrip("/")
    client = DocsSiteClient([origin])
    assert client.page(f"{origin}/docs/tls").title == "Enable TLS | Docs"
    for url in (
        "http://169.254.169.254/latest/meta-data/",
        f"{origin.replace('http://', 'https://')}/docs/tls",
        f"http://user:pass@{origin.removeprefix('http://')}/docs/tls",
        "file:///etc/passwd",
        f"{origin}.evil.example/docs/tls",
    ):
        with pytest.raises(PageRefused):
            client.page(url)
    assert origin_of("https://Docs.Example.com:443/a?b") == "https://docs.example.com"
