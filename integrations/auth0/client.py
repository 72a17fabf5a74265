"""Docs-site login through Auth0, on authlib's Django client: the authorize redirect and the verified ID token.

Endpoints come from the tenant's discovery document,
`https://{AUTH0_DOMAIN}/.well-known/openid-configuration`: `/authorize`,
`/oauth/token` (client_secret_basic) and the JWKS at `/.well-known/jwks.json`.

authlib keeps each login's state, nonce and PKCE verifier in `request.session`
(`_state_auth0_<state>`); here that is the dict the caller passes as
`pending`, so the caller decides where a login in progress is kept (the docs
login: a signed cookie, nothing on the server). authlib refuses a callback
whose state is not in it, and checks the ID token's signature against the
JWKS (fetched again when a token names an unknown key, as after Auth0 rotates
its keys), `exp`, `iat` and the nonce. Two checks are added here: by itself
authlib takes the expected issuer from the discovery document and checks the
audience only through `azp` (a token issued to another client that names ours
in `azp` passes), so the claims options pin `iss` to the configured tenant and
require our client id in `aud`.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from urllib.parse import urlsplit

import requests
from authlib.integrations.django_client import OAuth, OAuthError
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, HttpResponseRedirect
from joserfc.errors import JoseError

from integrations.http import is_transient_status, log_failed_call
from jobs import PermanentError, TransientError

SCOPE = "openid profile email"


def issuer_from_domain(domain: str) -> str:
    """`https://example.eu.auth0.com/` for `example.eu.auth0.com`; an http(s)://host:port URL keeps its scheme."""
    value = domain.strip()
    parts = urlsplit(value if "://" in value else f"https://{value}")
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path.strip("/") or parts.query:
        raise ImproperlyConfigured(f"AUTH0_DOMAIN must be a host name or an http(s)://host[:port] URL, not {domain!r}")
    # Auth0's issuer is the tenant URL with a trailing slash, and ID tokens carry exactly that in `iss`.
    return f"{parts.scheme}://{parts.netloc}/"


class Auth0Client:
    def __init__(self, domain: str, *, client_id: str, client_secret: str):
        self.issuer = issuer_from_domain(domain)
        self.client_id = client_id
        self._app = OAuth().register(
            "auth0",
            client_id=client_id,
            client_secret=client_secret,
            server_metadata_url=f"{self.issuer}.well-known/openid-configuration",
            client_kwargs={
                "scope": SCOPE,
                # PKCE on top of the client secret: a code intercepted on its way back is useless alone.
                "code_challenge_method": "S256",
                "default_timeout": (settings.HTTP_CONNECT_TIMEOUT, settings.HTTP_READ_TIMEOUT),
            },
            user_agent=settings.HTTP_USER_AGENT,
        )

    def authorize_redirect(self, request: HttpRequest, redirect_uri: str, *, pending: dict) -> HttpResponseRedirect:
        """A redirect to Auth0's login page; the state, nonce and PKCE verifier are written into `pending`."""
        with _client_errors(), _authlib_session(request, pending):
            return self._app.authorize_redirect(request, redirect_uri)

    def verified_claims(self, request: HttpRequest, *, pending: dict) -> dict:
        """The claims of the ID token the callback's code is exchanged for, once every check has passed.

        `pending` is what authorize_redirect wrote for this browser's login. PermanentError for a
        callback that cannot be trusted (an error answer, a state not in `pending`, a refused code,
        a token failing a check); TransientError when Auth0 is unreachable.
        """
        with _client_errors(), _authlib_session(request, pending):
            token = self._app.authorize_access_token(
                request,
                claims_options={
                    "iss": {"essential": True, "value": self.issuer},
                    "aud": {"essential": True, "value": self.client_id},
                    "sub": {"essential": True},
                },
            )
        # authlib validates an ID token only when the answer carries one: without it nothing was verified.
        claims = token.get("userinfo")
        if not claims:
            raise PermanentError("auth0: the token answer carries no ID token")
        return dict(claims)


def client_from_settings() -> Auth0Client | None:
    """None while AUTH0_DOMAIN, AUTH0_CLIENT_ID or AUTH0_CLIENT_SECRET is empty: the docs login is off."""
    if not (settings.AUTH0_DOMAIN and settings.AUTH0_CLIENT_ID and settings.AUTH0_CLIENT_SECRET):
        return None
    return _client(settings.AUTH0_DOMAIN, settings.AUTH0_CLIENT_ID, settings.AUTH0_CLIENT_SECRET)


@lru_cache(maxsize=1)
def _client(domain: str, client_id: str, client_secret: str) -> Auth0Client:
    # One per process and configuration: authlib keeps the discovery document and the JWKS it
    # fetched, so a login costs Auth0 one token request instead of three requests.
    return Auth0Client(domain, client_id=client_id, client_secret=client_secret)


@contextmanager
def _authlib_session(request: HttpRequest, pending: dict) -> Iterator[None]:
    """`pending` as the `request.session` authlib reads and writes a login's state in, for the duration."""
    session = getattr(request, "session", None)
    request.session = pending
    try:
        yield
    finally:
        request.session = session


@contextmanager
def _client_errors() -> Iterator[None]:
    """authlib's and requests' failures as the two kinds of error every client raises, logged as HttpClient logs."""
    try:
        yield
    except (requests.Timeout, requests.ConnectionError) as exc:
        request = exc.request
        log_failed_call(
            "auth0",
            method=getattr(request, "method", None),
            url=getattr(request, "url", None),
            timed_out=isinstance(exc, requests.Timeout),
        )
        raise TransientError("auth0: unreachable") from exc
    except requests.HTTPError as exc:
        status = exc.response.status_code
        log_failed_call("auth0", method=exc.response.request.method, url=exc.response.url, status=status)
        kind = TransientError if is_transient_status(status) else PermanentError
        raise kind(f"auth0: HTTP {status}") from exc
    except (OAuthError, JoseError, requests.RequestException, ValueError) as exc:
        # An error answer, a state not in this session, a refused code, a token failing a check,
        # or an answer that is not the JSON it should be.
        raise PermanentError(f"auth0: {exc}") from exc
