"""Docs login starts cost the server nothing but a per-IP counter, whatever cookies they carry; the login in
progress lives in a signed, short-lived cookie, and the round trip through the Auth0 stand-in still works."""

import time
from urllib.parse import parse_qs, urlsplit

import pytest
from django.conf import settings
from django.contrib.sessions.models import Session
from django.core import signing
from django.core.cache import cache
from django.test import Client
from rest_framework.throttling import SimpleRateThrottle

from docs_users.docs_auth import LOGIN_COOKIE_NAME, LOGIN_SALT, LOGIN_SECONDS
from docs_users.models import TrackedUser
from standins.auth0 import Auth0, rsa_signing_key

pytestmark = pytest.mark.django_db

DOCS_COOKIE = settings.DOCS_SESSION_COOKIE_NAME
CLIENT_ID = "docs-client-1"
CLIENT_SECRET = "docs-client-secret-1"
ADA = {"sub": "auth0|ada", "email": "ada@analytical-engines.example", "given_name": "Ada"}
SIGN_IN_FAILED = "Sign-in failed. Please go back to the docs and sign in again."


@pytest.fixture(scope="module")
def signing_key():
    return rsa_signing_key("docs-key-1")


@pytest.fixture
def auth0(settings, signing_key):
    with Auth0(client_id=CLIENT_ID, client_secret=CLIENT_SECRET, signing_key=signing_key) as tenant:
        cache.clear()  # the throttle counters: every test client comes from 127.0.0.1
        settings.AUTH0_DOMAIN = tenant.domain
        settings.AUTH0_CLIENT_ID, settings.AUTH0_CLIENT_SECRET = CLIENT_ID, CLIENT_SECRET
        yield tenant


@pytest.fixture
def rate(monkeypatch):
    """Set the docs-login rate; per hour, so that no window ends in the middle of a test."""
    return lambda value: monkeypatch.setitem(SimpleRateThrottle.THROTTLE_RATES, "docs_login", value)


def test_login_starts_with_made_up_session_cookies_are_throttled_and_store_nothing(client, auth0, rate):
    rate("20/hour")
    statuses = []
    for i in range(40):
        client.cookies.clear()
        client.cookies[DOCS_COOKIE] = f"junk{i}"
        statuses.append(client.get("/docs/login").status_code)

    assert statuses == [302] * 20 + [429] * 20
    assert Session.objects.count() == 0
    refused = client.get("/docs/login")
    assert int(refused["Retry-After"]) > 0
    # Another network is counted apart.
    assert client.get("/docs/login", REMOTE_ADDR="203.0.113.7").status_code == 302


def test_a_signed_in_reader_starting_a_login_is_counted_too(client, auth0, rate):
    rate("1/hour")
    sign_in(client, auth0)
    assert client.get("/docs/login").status_code == 429


def test_the_round_trip_writes_only_the_signed_in_session(client, auth0):
    start = client.get("/docs/login", {"next": "/docs/kafka/"})
    assert start.status_code == 302
    assert Session.objects.count() == 0, "starting a login stores nothing on the server"
    pending = start.cookies[LOGIN_COOKIE_NAME]
    assert pending["path"] == "/docs/callback" and pending["httponly"] and pending["samesite"] == "Lax"
    assert int(pending["max-age"]) == LOGIN_SECONDS
    assert DOCS_COOKIE not in start.cookies

    done = client.get("/docs/callback", auth0.log_in(start["Location"], profile=ADA))

    assert done.status_code == 302 and done["Location"] == "/docs/kafka/"
    [session] = Session.objects.all()
    assert session.session_key == done.cookies[DOCS_COOKIE].value
    assert session.get_decoded()["docs_sub"] == "auth0|ada"
    assert done.cookies[LOGIN_COOKIE_NAME].value == "", "the pending login is spent"
    assert TrackedUser.objects.get().sub == "auth0|ada"


def test_a_callback_brought_to_another_browser_signs_nobody_in(client, auth0):
    """Each browser's pending login is its own (a login CSRF: the attacker's callback in the victim's browser)."""
    client.get("/docs/login")
    attacker = Client()
    callback = auth0.log_in(attacker.get("/docs/login")["Location"], profile=ADA)

    refused = client.get("/docs/callback", callback)

    assert refused.status_code == 400 and refused.content.decode() == SIGN_IN_FAILED
    assert auth0.token_requests == 0 and not Session.objects.exists()
    assert attacker.get("/docs/callback", callback).status_code == 302, "in its own browser the login completes"


def test_a_forged_pending_login_is_refused_before_the_code_is_used(client, auth0):
    authorize_url = client.get("/docs/login")["Location"]
    value = client.cookies[LOGIN_COOKIE_NAME].value
    pending = signing.loads(value, salt=LOGIN_SALT)
    # The same login with another destination, signed with a key that is not the server's.
    pending["next"] = "https://evil.example/"
    client.cookies[LOGIN_COOKIE_NAME] = signing.dumps(pending, key="not-the-secret-key", salt=LOGIN_SALT)

    response = client.get("/docs/callback", auth0.log_in(authorize_url, profile=ADA))

    assert response.status_code == 400 and response.content.decode() == SIGN_IN_FAILED
    assert auth0.token_requests == 0
    assert not TrackedUser.objects.exists() and Session.objects.count() == 0


def test_a_pending_login_older_than_its_lifetime_is_refused(client, auth0):
    authorize_url = client.get("/docs/login")["Location"]
    pending = signing.loads(client.cookies[LOGIN_COOKIE_NAME].value, salt=LOGIN_SALT)
    # The same cookie as the server signed it LOGIN_SECONDS ago (the browser would have dropped it by now).
    client.cookies[LOGIN_COOKIE_NAME] = SignedThen(salt=LOGIN_SALT).sign_object(pending, compress=True)

    response = client.get("/docs/callback", auth0.log_in(authorize_url, profile=ADA))

    assert response.status_code == 400 and response.content.decode() == SIGN_IN_FAILED
    assert auth0.token_requests == 0
    assert not TrackedUser.objects.exists()


def test_replaying_a_pending_login_at_the_callback_is_throttled(client, auth0, rate):
    """The server cannot spend a signed cookie: replays of one are bounded per IP, not by the tenant."""
    rate("3/hour")
    state = parse_qs(urlsplit(client.get("/docs/login")["Location"]).query)["state"][0]
    pending = client.cookies[LOGIN_COOKIE_NAME].value
    statuses = []
    for i in range(5):
        client.cookies[LOGIN_COOKIE_NAME] = pending  # as an attacker who kept a copy would send it
        statuses.append(client.get("/docs/callback", {"code": f"guessed-code-{i}", "state": state}).status_code)

    assert statuses == [400, 400, 400, 429, 429]
    assert auth0.token_requests == 3


class SignedThen(signing.TimestampSigner):
    def timestamp(self):
        return signing.b62_encode(int(time.time()) - LOGIN_SECONDS - 1)


def sign_in(client, auth0):
    authorize_url = client.get("/docs/login")["Location"]
    response = client.get("/docs/callback", auth0.log_in(authorize_url, profile=ADA))
    assert response.status_code == 302, response.content
    return response
