"""Docs-site login through a local stand-in of an Auth0 tenant: the browser's round trip, and every way it must fail."""

import time

import pytest
from django.conf import settings
from django.contrib.sessions.backends.db import SessionStore
from django.contrib.sessions.models import Session
from django.core.cache import cache
from django.core.exceptions import ImproperlyConfigured
from django.test import Client, RequestFactory
from django.urls import reverse
from joserfc.jwk import OctKey
from rest_framework.throttling import SimpleRateThrottle

from docs_users.activity import tracked_user_sign_in
from docs_users.docs_auth import docs_session_sub
from docs_users.models import TrackedUser
from integrations.auth0.client import issuer_from_domain
from standins.auth0 import Auth0, rsa_signing_key
from tests.conftest import free_port, minute_with_time_left

pytestmark = pytest.mark.django_db

DOCS_COOKIE = settings.DOCS_SESSION_COOKIE_NAME

CLIENT_ID = "pQ7rN2xLk9sVw4ZbT1cYh8mJd3fGa6Ue"
CLIENT_SECRET = "Xk3v9Qm2Lr7TzW5nB8cH1yJd4fGs6Pa0Ue2Ri9Ot5Yw3Zq7Nv1Mb8Cx4Ly6Kj2Hg"
KID = "fake-auth0-key-1"

JANE = {
    "sub": "auth0|64f1c2e9a7b3d5e8f0a1b2c3",
    "email": "jane.doe@acme-industries.com",
    "given_name": "Jane",
    "family_name": "Doe",
    "name": "Jane Doe",
    "org_id": "org_W30nS0p1fcA8T5Yd",
    "org_name": "Acme Industries",
}
SIGN_IN_FAILED = "Sign-in failed. Please go back to the docs and sign in again."


@pytest.fixture(scope="module")
def signing_key():
    return rsa_signing_key(KID)


@pytest.fixture
def auth0(settings, signing_key):
    with Auth0(client_id=CLIENT_ID, client_secret=CLIENT_SECRET, signing_key=signing_key) as tenant:
        cache.clear()  # the per-IP docs-login throttle: every test client signs in from 127.0.0.1
        settings.AUTH0_DOMAIN = tenant.domain
        settings.AUTH0_CLIENT_ID = CLIENT_ID
        settings.AUTH0_CLIENT_SECRET = CLIENT_SECRET
        yield tenant


def start_login(client, next_path=None):
    """The reader clicks "Sign in" on the docs: our redirect to the tenant's login page."""
    response = client.get("/docs/login", {"next": next_path} if next_path else {})
    assert response.status_code == 302, response.content
    return response["Location"]


def sign_in(client, auth0, *, next_path=None, profile=JANE, **login):
    """The whole round trip: our login, the tenant's login page, back to our callback."""
    authorize_url = start_login(client, next_path)
    return client.get("/docs/callback", auth0.log_in(authorize_url, profile=profile, **login))


def session_sub(client):
    request = RequestFactory().get("/")
    if DOCS_COOKIE in client.cookies:
        request.COOKIES[DOCS_COOKIE] = client.cookies[DOCS_COOKIE].value
    return docs_session_sub(request)


def test_sign_in_records_the_reader_and_opens_their_docs_session(client, auth0):
    anonymous_session = SessionStore()
    anonymous_session.create()  # a docs session id in the browser before the login (left over, or planted)
    client.cookies[DOCS_COOKIE] = anonymous_session.session_key

    response = sign_in(client, auth0, next_path="/docs/kafka/get-started/?tab=cloud")

    assert response.status_code == 302
    assert response["Location"] == "/docs/kafka/get-started/?tab=cloud"
    user = TrackedUser.objects.get()
    assert (user.sub, user.email, user.given_name, user.family_name) == (
        JANE["sub"],
        "jane.doe@acme-industries.com",
        "Jane",
        "Doe",
    )
    assert user.company == "Acme Industries"
    assert user.last_channel == TrackedUser.Channel.DOCS_LOGIN
    assert user.signed_up_at == user.last_sign_in_at is not None
    assert user.is_pending
    assert session_sub(client) == JANE["sub"]
    # A session id that existed before the login is not the signed-in one.
    assert response.cookies[DOCS_COOKIE].value != anonymous_session.session_key


def test_authorize_redirect_goes_to_the_tenant_with_this_sites_callback(client, auth0):
    authorize_url = start_login(client)

    assert authorize_url.startswith(f"{auth0.issuer}authorize?")
    assert "redirect_uri=http%3A%2F%2Ftestserver%2Fdocs%2Fcallback" in authorize_url
    assert "scope=openid+profile+email" in authorize_url


def test_without_an_organization_the_company_comes_from_the_email_domain(client, auth0):
    sam = {"sub": "google-oauth2|1093847561029384756", "email": "sam@northwind-traders.co.uk", "given_name": "Sam"}

    assert sign_in(client, auth0, profile=sam).status_code == 302

    assert TrackedUser.objects.get().company == "Northwind Traders"


def test_an_unverified_email_is_not_stored_nor_used_for_the_company(client, auth0):
    sam = {"sub": "auth0|sam", "email": "ceo@bigbank.com", "given_name": "Sam"}

    assert sign_in(client, auth0, profile=sam, claims={"email_verified": False}).status_code == 302

    user = TrackedUser.objects.get()
    assert (user.email, user.company, user.given_name) == ("", "", "Sam")


def test_overlong_claims_are_capped_not_crashed_on(client, auth0):
    long = {"sub": "auth0|long", "email": "a" * 250 + "@acme.com", "given_name": "G" * 500, "org_name": "O" * 500}

    assert sign_in(client, auth0, profile=long).status_code == 302

    user = TrackedUser.objects.get()
    assert (user.email, len(user.given_name), len(user.company)) == ("", 150, 200)


def test_sign_in_completes_a_reader_known_from_the_mcp_server(client, auth0):
    tracked_user_sign_in(
        sub=JANE["sub"], channel=TrackedUser.Channel.MCP, email=JANE["email"], user_agent="claude-code/1.0.3"
    )

    assert sign_in(client, auth0).status_code == 302

    user = TrackedUser.objects.get()
    assert (user.given_name, user.family_name, user.company) == ("Jane", "Doe", "Acme Industries")
    assert user.last_channel == TrackedUser.Channel.DOCS_LOGIN
    assert user.mcp_client == "Claude Code"


ROGUE_KEY = rsa_signing_key(KID)  # same key id as the tenant's, not the tenant's key


@pytest.mark.parametrize(
    "login",
    [
        pytest.param({"claims": {"aud": "another-client-id"}}, id="audience-of-another-client"),
        # authlib alone accepts this one: it checks the audience only through azp.
        pytest.param({"claims": {"aud": "another-client-id", "azp": CLIENT_ID}}, id="audience-with-our-azp"),
        pytest.param({"claims": {"iss": "https://evil.example/"}}, id="another-issuer"),
        pytest.param({"sign_with": ROGUE_KEY}, id="signed-with-another-key"),
        pytest.param({"sign_with": OctKey.import_key(CLIENT_SECRET), "alg": "HS256"}, id="hs256-with-client-secret"),
        pytest.param({"claims": {"iat": int(time.time()) - 7200, "exp": int(time.time()) - 3600}}, id="expired"),
        pytest.param({"claims": {"nonce": "a-nonce-from-another-login"}}, id="nonce-of-another-login"),
        pytest.param({"claims": {"nonce": None}}, id="no-nonce"),
        pytest.param({"with_id_token": False}, id="no-id-token"),
    ],
)
def test_a_token_failing_a_check_signs_nobody_in(client, auth0, login):
    response = sign_in(client, auth0, **login)

    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/plain")
    assert response.content.decode() == SIGN_IN_FAILED
    assert not TrackedUser.objects.exists()
    assert session_sub(client) is None


def test_a_callback_with_another_state_is_refused_before_the_code_is_used(client, auth0):
    callback = auth0.log_in(start_login(client), profile=JANE)

    response = client.get("/docs/callback", {**callback, "state": "state-of-someone-elses-login"})

    assert response.status_code == 400
    assert response.content.decode() == SIGN_IN_FAILED
    assert auth0.token_requests == 0
    assert not TrackedUser.objects.exists()
    assert session_sub(client) is None


def test_a_callback_from_another_browser_is_refused(client, auth0):
    callback = auth0.log_in(start_login(client), profile=JANE)

    response = Client().get("/docs/callback", callback)

    assert response.status_code == 400
    assert not TrackedUser.objects.exists()


def test_a_callback_works_once(client, auth0):
    callback = auth0.log_in(start_login(client), profile=JANE)
    assert client.get("/docs/callback", callback).status_code == 302

    assert client.get("/docs/callback", callback).status_code == 400


def test_an_error_answer_from_the_tenant_signs_nobody_in(client, auth0):
    state = auth0.log_in(start_login(client), profile=JANE)["state"]

    response = client.get(
        "/docs/callback",
        {"error": "access_denied", "error_description": "User is not a member of the organization", "state": state},
    )

    assert response.status_code == 400
    assert response.content.decode() == SIGN_IN_FAILED
    assert auth0.token_requests == 0
    assert not TrackedUser.objects.exists()


@pytest.mark.parametrize(
    "next_path", ["https://evil.example/phish", "//evil.example/phish", "/\\evil.example/phish", "javascript:alert(1)"]
)
def test_a_next_pointing_off_the_site_is_ignored(client, auth0, next_path):
    response = sign_in(client, auth0, next_path=next_path)

    assert response.status_code == 302
    assert response["Location"] == "/"


def test_an_abandoned_logins_next_is_not_reused(client, auth0):
    start_login(client, "/docs/private/draft/")

    response = sign_in(client, auth0)

    assert response["Location"] == "/"


def test_logout_ends_the_docs_session(client, auth0):
    sign_in(client, auth0)

    response = client.post("/docs/logout", {"next": "/docs/kafka/"})

    assert response.status_code == 302
    assert response["Location"] == "/docs/kafka/"
    assert session_sub(client) is None
    assert TrackedUser.objects.filter(sub=JANE["sub"]).exists()  # the record stays; only the session ends


def test_logout_ignores_a_next_off_the_site(client, auth0):
    sign_in(client, auth0)

    response = client.post("/docs/logout", {"next": "https://evil.example/"})

    assert response["Location"] == "/"
    assert session_sub(client) is None


@pytest.mark.parametrize("unset", ["AUTH0_DOMAIN", "AUTH0_CLIENT_ID", "AUTH0_CLIENT_SECRET"])
def test_login_is_off_until_configured(client, settings, unset):
    settings.AUTH0_DOMAIN = "example.eu.auth0.com"
    settings.AUTH0_CLIENT_ID = CLIENT_ID
    settings.AUTH0_CLIENT_SECRET = CLIENT_SECRET
    setattr(settings, unset, "")

    for url in ("/docs/login", "/docs/callback"):
        response = client.get(url)
        assert response.status_code == 404
        assert response.content.decode() == "Docs login is not configured."


def test_an_unreachable_tenant_is_reported_not_crashed_on(client, settings, caplog):
    settings.AUTH0_DOMAIN = f"http://127.0.0.1:{free_port()}"
    settings.AUTH0_CLIENT_ID = CLIENT_ID
    settings.AUTH0_CLIENT_SECRET = CLIENT_SECRET

    response = client.get("/docs/login")

    assert response.status_code == 502
    assert response.content.decode() == "The sign-in service is not answering. Please try again in a minute."
    [failed_call] = [
        r.msg for r in caplog.records if isinstance(r.msg, dict) and r.msg.get("event") == "http_connection_error"
    ]
    assert failed_call["service"] == "auth0"
    assert (failed_call["host"], failed_call["path"]) == ("127.0.0.1", "/.well-known/openid-configuration")


@pytest.mark.parametrize(
    "domain, issuer",
    [
        ("example.eu.auth0.com", "https://example.eu.auth0.com/"),
        (" login.example.com/ ", "https://login.example.com/"),
        ("http://localhost:8765", "http://localhost:8765/"),
    ],
)
def test_the_tenant_issuer_is_read_from_a_domain_or_a_url(domain, issuer):
    assert issuer_from_domain(domain) == issuer


@pytest.mark.parametrize("domain", ["example.eu.auth0.com/authorize", "ftp://example.eu.auth0.com", "https://"])
def test_a_domain_that_is_not_a_tenant_address_is_refused(domain):
    with pytest.raises(ImproperlyConfigured):
        issuer_from_domain(domain)


# --- the docs session is not the admin's; bursts; only a verified email counts -------------------------


def test_signing_out_of_the_docs_leaves_the_admin_session_alone(client, auth0, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("root", "root@example.com", "pw"))
    assert sign_in(client, auth0).status_code == 302
    assert client.get(reverse("admin:index")).status_code == 200, "signing in to the docs kept staff signed in"

    assert client.post("/docs/logout").status_code == 302

    assert client.get(reverse("admin:index")).status_code == 200, "still signed in to the admin"
    assert client.cookies[settings.DOCS_SESSION_COOKIE_NAME].value == "", "the docs session ended"


def test_an_admin_session_is_not_a_docs_sign_in(client, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("root", "root@example.com", "pw"))
    request = client.get(reverse("admin:index")).wsgi_request
    request.session["docs_sub"] = "auth0|planted"  # written into the admin session, as before the split
    assert docs_session_sub(request) is None


@pytest.mark.parametrize("claim", [None, "true", 1])
def test_only_a_true_email_verified_claim_counts(client, auth0, claim):
    assert sign_in(client, auth0, claims={"email_verified": claim}).status_code == 302
    user = TrackedUser.objects.get()
    assert user.email == "" and user.given_name == "Jane"


def test_docs_login_bursts_are_refused_and_write_no_session(client, auth0, monkeypatch):
    monkeypatch.setitem(SimpleRateThrottle.THROTTLE_RATES, "docs_login", "3/min")
    minute_with_time_left()
    statuses = []
    for _ in range(5):
        client.cookies.clear()
        statuses.append(client.get("/docs/login").status_code)
    assert statuses == [302, 302, 302, 429, 429]
    assert Session.objects.count() == 0
