"""Docs-site sign-in through Auth0: login, callback and logout, and whose docs session a request carries.

`docs_sub` in the docs session is the signed-in reader's Auth0 `sub`. It is
set only once the ID token has passed every check (integrations/auth0/), and on
a fresh session key, so a session id planted in the browser before the login is
worth nothing after it.

The docs session is a Django session of its own, under the cookie
DOCS_SESSION_COOKIE_NAME, never the admin's: signing in or out of the docs
leaves a staff member's admin session alone, and an admin session is never a
docs sign-in.

A login in progress (authlib's state, nonce and PKCE verifier, and where the
reader goes afterwards) waits in a signed cookie of its own, LOGIN_COOKIE_NAME,
sent only to the callback and good for LOGIN_SECONDS. Starting a login stores
nothing on the server: a burst of starts costs a throttle counter, whatever
cookies it carries. Signed, not encrypted: it holds this browser's own login,
which whoever holds the cookie could complete anyway. The server cannot spend
it, so callbacks are throttled per client IP too: a replayed cookie cannot turn
into a stream of token requests to Auth0.
"""

import functools
from importlib import import_module

import structlog
from django.conf import settings
from django.core import signing
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from docs_users.activity import tracked_user_sign_in
from docs_users.models import TrackedUser
from foundation.throttling import ClientIpRateThrottle
from integrations.auth0.client import Auth0Client, client_from_settings
from jobs import PermanentError, TransientError

logger = structlog.get_logger(__name__)

SESSION_SUB = "docs_sub"

LOGIN_COOKIE_NAME = "docs_login"
LOGIN_SECONDS = 15 * 60  # time to get through Auth0's pages (sign-up, MFA); a later callback is refused
LOGIN_SALT = "tracking.docs_auth.pending-login"  # as first issued: a login under way keeps its cookie valid
PENDING_NEXT = "next"

NOT_CONFIGURED = "Docs login is not configured."
SIGN_IN_FAILED = "Sign-in failed. Please go back to the docs and sign in again."
PROVIDER_UNAVAILABLE = "The sign-in service is not answering. Please try again in a minute."
TOO_MANY = "Too many sign-in attempts from your network. Please try again in a minute."


class DocsLoginThrottle(ClientIpRateThrottle):
    """Login starts per client IP, whatever cookies they carry."""

    scope = "docs_login"


class DocsCallbackThrottle(DocsLoginThrottle):
    """Callbacks per client IP, at the login starts' rate and counted apart from them."""

    cache_format = "throttle_%(scope)s_callback_%(ident)s"


def _docs_store(request):
    return import_module(settings.SESSION_ENGINE).SessionStore(request.COOKIES.get(settings.DOCS_SESSION_COOKIE_NAME))


def docs_session_sub(request) -> str | None:
    """The Auth0 `sub` of the docs reader signed in on this request's docs session, else None."""
    return _docs_store(request).get(SESSION_SUB) or None


def with_docs_session(view):
    """Run `view` with the docs session as `request.session`, and save it under its own cookie as
    SessionMiddleware saves the admin's."""

    @functools.wraps(view)
    def wrapped(request, *args, **kwargs):
        docs, staff = _docs_store(request), getattr(request, "session", None)
        request.session = docs
        try:
            response = view(request, *args, **kwargs)
        finally:
            request.session = staff
        name = settings.DOCS_SESSION_COOKIE_NAME
        if docs.is_empty():
            if name in request.COOKIES:
                response.delete_cookie(name, path="/", samesite=settings.SESSION_COOKIE_SAMESITE)
        elif docs.modified or (docs.accessed and settings.SESSION_SAVE_EVERY_REQUEST):
            docs.save()
            response.set_cookie(
                name, docs.session_key, max_age=settings.SESSION_COOKIE_AGE, path="/",
                secure=settings.SESSION_COOKIE_SECURE, httponly=True, samesite=settings.SESSION_COOKIE_SAMESITE,
            )  # fmt: skip
        return response

    return wrapped


@require_GET
def docs_login(request: HttpRequest) -> HttpResponse:
    """Off to Auth0's login page; `?next=` is where the reader lands afterwards, if it is a path on this site.

    The login replaces any earlier one of this browser still pending: one login at a time."""
    client = client_from_settings()
    if client is None:
        return _plain(NOT_CONFIGURED, status=404)
    if (refused := _throttled(request, DocsLoginThrottle())) is not None:
        return refused
    pending = {}
    next_path = request.GET.get("next", "")
    if _is_path_on_this_site(next_path):
        pending[PENDING_NEXT] = next_path
    callback = reverse("docs-callback")
    try:
        response = client.authorize_redirect(request, request.build_absolute_uri(callback), pending=pending)
    except (PermanentError, TransientError) as exc:
        logger.warning("docs_login_provider_unavailable", reason=str(exc))
        return _plain(PROVIDER_UNAVAILABLE, status=502)
    response.set_cookie(
        LOGIN_COOKIE_NAME, signing.dumps(pending, salt=LOGIN_SALT, compress=True), max_age=LOGIN_SECONDS,
        path=callback, secure=settings.SESSION_COOKIE_SECURE, httponly=True,
        samesite="Lax",  # the callback is a navigation from Auth0's site: Strict would leave the cookie behind
    )  # fmt: skip
    return response


@require_GET
@with_docs_session
def docs_callback(request: HttpRequest) -> HttpResponse:
    """Auth0 sends the reader back here with a code: sign them in, or refuse and store nothing.

    Either way the pending login is spent: its cookie is deleted."""
    client = client_from_settings()
    if client is None:
        return _plain(NOT_CONFIGURED, status=404)
    if (refused := _throttled(request, DocsCallbackThrottle())) is not None:
        return refused
    response = _sign_in(request, client, _pending_login(request))
    response.delete_cookie(LOGIN_COOKIE_NAME, path=reverse("docs-callback"), samesite="Lax")
    return response


def _sign_in(request: HttpRequest, client: Auth0Client, pending: dict) -> HttpResponse:
    try:
        claims = client.verified_claims(request, pending=pending)
    except PermanentError as exc:
        logger.warning("docs_login_rejected", reason=str(exc))
        return _plain(SIGN_IN_FAILED, status=400)
    except TransientError as exc:
        logger.warning("docs_login_provider_unavailable", reason=str(exc))
        return _plain(PROVIDER_UNAVAILABLE, status=502)
    user = tracked_user_sign_in(
        sub=claims["sub"],
        channel=TrackedUser.Channel.DOCS_LOGIN,
        # An address not verified (the claim false, missing or not a boolean) may be anyone's: it must not
        # name a lead or guess a company.
        email=_text_claim(claims, "email") if claims.get("email_verified") is True else "",
        given_name=_text_claim(claims, "given_name"),
        family_name=_text_claim(claims, "family_name"),
        org_name=_text_claim(claims, "org_name"),  # present when the login went through an Auth0 organization
    )
    request.session.cycle_key()
    request.session[SESSION_SUB] = user.sub
    return HttpResponseRedirect(pending.get(PENDING_NEXT, "/"))


@require_POST
@with_docs_session
def docs_logout(request: HttpRequest) -> HttpResponse:
    next_path = request.POST.get("next", "")
    request.session.flush()
    return HttpResponseRedirect(next_path if _is_path_on_this_site(next_path) else "/")


def _pending_login(request: HttpRequest) -> dict:
    """What docs_login wrote for this browser's login; {} when its cookie is missing, forged or too old."""
    try:
        return signing.loads(request.COOKIES.get(LOGIN_COOKIE_NAME, ""), salt=LOGIN_SALT, max_age=LOGIN_SECONDS)
    except signing.BadSignature:  # SignatureExpired is one
        return {}


def _throttled(request: HttpRequest, throttle: DocsLoginThrottle) -> HttpResponse | None:
    """429 with Retry-After when `throttle` refuses the request, else None (and the request is counted)."""
    if throttle.allow_request(request, None):
        return None
    response = _plain(TOO_MANY, status=429)
    response["Retry-After"] = str(int(throttle.wait()) + 1)
    return response


def _is_path_on_this_site(url: str) -> bool:
    """True for a path here like /docs/x?y; false for https://evil.example/, //evil.example and /\\evil.example."""
    return url.startswith("/") and url_has_allowed_host_and_scheme(url, allowed_hosts=None)


def _text_claim(claims: dict, name: str) -> str:
    value = claims.get(name)
    return value if isinstance(value, str) else ""


def _plain(message: str, *, status: int) -> HttpResponse:
    return HttpResponse(message, status=status, content_type="text/plain; charset=utf-8")
