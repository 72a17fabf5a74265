"""A local Auth0 tenant that answers as Auth0 does, for both of the product's uses: the docs login (OpenID
Connect, authorization code with PKCE) and the access tokens the MCP server accepts for its API.

- `GET /.well-known/openid-configuration`: the discovery document (Auth0's fields, trimmed);
- `GET /.well-known/jwks.json`: the public halves of `keys` (the signing key; add one to play a rotation);
- `GET /authorize`: the sign-in page, a form for one of `users` (the demo user's email and password are
  shown on it); `POST /authorize` checks them and sends the browser back to `redirect_uri` with `code`
  and `state`. This tenant requires PKCE with S256, as the product always sends it;
- `POST /oauth/token`: the authorization code grant, the client authenticated with client_secret_basic or
  client_secret_post, answering `{"access_token", "id_token", "scope", "expires_in", "token_type"}` or, like
  Auth0, 403 `{"error": "invalid_grant", ...}` / 401 `{"error": "access_denied", ...}`. The ID token is
  signed when the code is exchanged, with the nonce of that authorize request. When the authorize request
  named the API (`audience`), the access token is a JWT for it, as Auth0 issues one.

Access tokens for the API (`mint`) are RS256 JWTs signed with the tenant key: `iss` the tenant URL with a
trailing slash, `aud` the API identifier and the userinfo URL, `azp` the client, `scope`, `iat`/`exp`.

In tests, the browser's visit to the sign-in page is played by `log_in(authorize_url, profile=...)`,
which returns the query the browser brings back to the callback:

    with Auth0(client_id="id", client_secret="secret") as tenant:
        settings.AUTH0_DOMAIN = tenant.domain
        client.get("/docs/callback", tenant.log_in(authorize_url, profile={"sub": "auth0|ada", ...}))

Alone (`make run` starts every stand-in through `python -m standins`):

    python -m standins.auth0 --port 8776
"""

import argparse
import base64
import functools
import hashlib
import hmac
import html
import secrets
import time
from collections.abc import Mapping, Sequence
from urllib.parse import parse_qsl, urlencode, urlsplit

from aiohttp import web
from joserfc import jwt
from joserfc.jwk import OctKey, RSAKey

from standins.base import Received
from standins.serving import AiohttpStandIn

CLIENT_ID = "standin-auth0-client"
CLIENT_SECRET = "standin-auth0-client-secret"
AUDIENCE = "https://api.docs.example.com/mcp"  # the identifier of the Auth0 API the MCP server's tokens are for
SCOPE = "openid profile email"
DEMO_EMAIL = "demo@example.com"
DEMO_PASSWORD = "demo"
DEMO_PROFILE = {
    "sub": "auth0|6650f1c2e9a7b3d5e8f0a1b2",
    "email": DEMO_EMAIL,
    "given_name": "Dana",
    "family_name": "Demo",
    "name": "Dana Demo",
    "nickname": "demo",
    "org_name": "Example Industries",
}


def rsa_signing_key(kid: str) -> RSAKey:
    return RSAKey.generate_key(2048, parameters={"kid": kid, "use": "sig", "alg": "RS256"})


@functools.cache
def tenant_key() -> RSAKey:
    """The key every tenant signs with unless given one: generating a key costs a tenth of a second."""
    return rsa_signing_key("tenant-key-1")


class AuthorizeRefused(ValueError):
    """An authorize request Auth0 would not show its sign-in page for."""


class Auth0(AiohttpStandIn):
    name = "auth0"

    def __init__(
        self,
        *,
        client_id: str = CLIENT_ID,
        client_secret: str = CLIENT_SECRET,
        audience: str = AUDIENCE,
        signing_key: RSAKey | None = None,
        users: Mapping[str, tuple[str, dict]] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ):
        super().__init__(host=host, port=port)
        self.client_id = client_id
        self.client_secret = client_secret
        self.audience = audience
        self.signing_key = signing_key or tenant_key()
        self.keys = [self.signing_key]  # published in the JWKS
        # email → (password, the user's claims): who can sign in on the page
        self.users = dict(users) if users is not None else {DEMO_EMAIL: (DEMO_PASSWORD, DEMO_PROFILE)}
        self.token_requests = 0
        self.jwks_requests = 0
        self._logins: dict[str, dict] = {}  # code → what the token request must match and the ID token to sign

    @property
    def issuer(self) -> str:
        return f"{self.origin}/"

    @property
    def domain(self) -> str:
        """AUTH0_DOMAIN for this tenant: http://host:port."""
        return self.origin

    def settings(self) -> dict[str, str]:
        return {
            "AUTH0_DOMAIN": self.domain,
            "AUTH0_CLIENT_ID": self.client_id,
            "AUTH0_CLIENT_SECRET": self.client_secret,
            "MCP_AUDIENCE": self.audience,
        }

    def routes(self, app: web.Application) -> None:
        app.router.add_get("/.well-known/openid-configuration", self._discovery)
        app.router.add_get("/.well-known/jwks.json", self._jwks)
        app.router.add_get("/authorize", self._sign_in_page)
        app.router.add_post("/authorize", self._sign_in)
        app.router.add_post("/oauth/token", self._token)

    def discovery_document(self) -> dict:
        issuer = self.issuer
        return {
            "issuer": issuer,
            "authorization_endpoint": f"{issuer}authorize",
            "token_endpoint": f"{issuer}oauth/token",
            "userinfo_endpoint": f"{issuer}userinfo",
            "jwks_uri": f"{issuer}.well-known/jwks.json",
            "end_session_endpoint": f"{issuer}oidc/logout",
            "scopes_supported": ["openid", "profile", "offline_access", "name", "given_name", "family_name", "email"],
            "response_types_supported": ["code", "token", "id_token", "code token", "code id_token"],
            "code_challenge_methods_supported": ["S256", "plain"],
            "response_modes_supported": ["query", "fragment", "form_post"],
            "subject_types_supported": ["public"],
            "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post", "private_key_jwt"],
            "claims_supported": ["aud", "auth_time", "email", "email_verified", "exp", "family_name", "given_name"]
            + ["iat", "iss", "name", "nickname", "picture", "sub"],
            "id_token_signing_alg_values_supported": ["HS256", "RS256", "PS256"],
        }

    # --- access tokens for the API ----------------------------------------------------------------------

    def mint(self, subject: str, *, key: RSAKey | None = None, **overrides) -> str:
        """An access token for the API, as Auth0 issues it; an override of None leaves that claim out."""
        key = key or self.signing_key
        now = int(time.time())
        claims = {
            "iss": self.issuer,
            "sub": subject,
            "aud": [self.audience, f"{self.issuer}userinfo"],
            "azp": self.client_id,
            "scope": SCOPE,
            "iat": now,
            "exp": now + 3600,
            **overrides,
        }
        claims = {name: value for name, value in claims.items() if value is not None}
        return jwt.encode({"alg": "RS256", "typ": "JWT", "kid": key.kid}, claims, key, algorithms=["RS256"])

    # --- signing in -------------------------------------------------------------------------------------

    def log_in(
        self,
        authorize_url: str,
        *,
        profile: dict,
        claims: dict | None = None,
        sign_with: RSAKey | OctKey | None = None,
        alg: str = "RS256",
        with_id_token: bool = True,
    ) -> dict:
        """The user signs in on the page: the query Auth0 sends the browser back to the callback with.

        `profile` is the user's claims (sub, email, names, org_name); `claims` overrides or, with None,
        removes standard claims of the ID token; `sign_with` and `alg` sign it with another key.
        """
        url = urlsplit(authorize_url)
        if f"{url.scheme}://{url.netloc}{url.path}" != f"{self.issuer}authorize":
            raise AuthorizeRefused(f"not this tenant's authorize endpoint: {authorize_url}")
        request = self._authorize_request(dict(parse_qsl(url.query)))
        code = self._issue_code(request, profile, claims=claims, key=sign_with, alg=alg, with_id_token=with_id_token)
        return {"code": code, "state": request["state"]}

    def _authorize_request(self, query: Mapping[str, str]) -> dict:
        """The authorize request's parameters once they pass Auth0's checks (and this tenant's: PKCE, S256)."""
        if query.get("client_id") != self.client_id:
            raise AuthorizeRefused("Unknown client.")
        if query.get("response_type") != "code":
            raise AuthorizeRefused("Unsupported response type: this tenant answers the authorization code flow.")
        if not query.get("redirect_uri"):
            raise AuthorizeRefused("Missing redirect_uri.")
        if "openid" not in query.get("scope", "").split():
            raise AuthorizeRefused("The scope must include openid.")
        if not query.get("code_challenge") or query.get("code_challenge_method") != "S256":
            raise AuthorizeRefused("This tenant requires PKCE with code_challenge_method=S256.")
        return {
            "redirect_uri": query["redirect_uri"],
            "code_challenge": query["code_challenge"],
            "nonce": query.get("nonce"),
            "state": query.get("state", ""),
            "audience": query.get("audience", ""),
        }

    def _issue_code(self, request: dict, profile: dict, *, claims=None, key=None, alg="RS256", with_id_token=True):
        now = int(time.time())
        id_token_claims = {
            "iss": self.issuer,
            "aud": self.client_id,
            "iat": now,
            "exp": now + 36000,
            "nonce": request["nonce"],
            "sid": secrets.token_urlsafe(16),
            "email_verified": True,
            **profile,
        }
        for name, value in (claims or {}).items():
            if value is None:
                id_token_claims.pop(name, None)
            else:
                id_token_claims[name] = value
        id_token_claims = {name: value for name, value in id_token_claims.items() if value is not None}
        code = secrets.token_urlsafe(24)
        self._logins[code] = {
            **request,
            "claims": id_token_claims,
            "key": key or self.signing_key,
            "alg": alg,
            "with_id_token": with_id_token,
        }
        self.record(
            Received(self.name, "sign-in", profile.get("email") or profile.get("sub", ""),
                     detail={"sub": profile.get("sub"), "client_id": self.client_id,
                             "redirect_uri": request["redirect_uri"]})
        )  # fmt: skip
        return code

    # --- serving ----------------------------------------------------------------------------------------

    async def _discovery(self, request: web.Request) -> web.Response:
        return web.json_response(self.discovery_document())

    async def _jwks(self, request: web.Request) -> web.Response:
        self.jwks_requests += 1
        return web.json_response({"keys": [key.as_dict(private=False) for key in self.keys]})

    async def _sign_in_page(self, request: web.Request) -> web.Response:
        try:
            self._authorize_request(request.query)
        except AuthorizeRefused as refused:
            return _page("Sign-in error", f"<p>{html.escape(str(refused))}</p>", status=400)
        return _page("Sign in", self._form(request.query_string))

    async def _sign_in(self, request: web.Request) -> web.Response:
        try:
            authorize = self._authorize_request(request.query)
        except AuthorizeRefused as refused:
            return _page("Sign-in error", f"<p>{html.escape(str(refused))}</p>", status=400)
        form = await request.post()
        email = str(form.get("email", "")).strip().lower()
        password, profile = self.users.get(email, ("", {}))
        if not password or not hmac.compare_digest(str(form.get("password", "")).encode(), password.encode()):
            return _page("Sign in", self._form(request.query_string, given=email, error="Wrong email or password."))
        code = self._issue_code(authorize, profile)
        back = {"code": code, **({"state": authorize["state"]} if authorize["state"] else {})}
        separator = "&" if "?" in authorize["redirect_uri"] else "?"
        raise web.HTTPFound(f"{authorize['redirect_uri']}{separator}{urlencode(back)}")

    def _form(self, query_string: str, *, given: str = "", error: str = "") -> str:
        hint = ", ".join(
            f"<b>{html.escape(email)}</b> / password <b>{html.escape(password)}</b>"
            for email, (password, _) in self.users.items()
        )
        return (
            (f'<p class="error">{html.escape(error)}</p>' if error else "")
            + f'<form method="post" action="/authorize?{html.escape(query_string)}">'
            + f'<label>Email <input type="email" name="email" value="{html.escape(given)}" required autofocus></label>'
            + '<label>Password <input type="password" name="password" required></label>'
            + "<button>Continue</button></form>"
            + f'<p class="hint">A local stand-in of Auth0. Demo account: {hint}.</p>'
        )

    async def _token(self, request: web.Request) -> web.Response:
        self.token_requests += 1
        form = await request.post()
        client_id, client_secret = _client_credentials(request.headers.get("Authorization", ""), form)
        if not (
            hmac.compare_digest(client_id.encode(), self.client_id.encode())
            and hmac.compare_digest(client_secret.encode(), self.client_secret.encode())
        ):
            return web.json_response({"error": "access_denied", "error_description": "Unauthorized"}, status=401)
        login = self._logins.pop(str(form.get("code", "")), None)  # a code is good once
        if form.get("grant_type") != "authorization_code" or login is None:
            return _invalid_grant("Invalid authorization code")
        if form.get("redirect_uri") != login["redirect_uri"]:
            return _invalid_grant("redirect_uri mismatch")
        if _s256(str(form.get("code_verifier", ""))) != login["code_challenge"]:
            return _invalid_grant("Failed to verify code verifier")
        sub = login["claims"].get("sub", "")
        # Auth0 issues a JWT access token only for an API named in the authorize request; else an opaque one.
        access_token = self.mint(sub) if login["audience"] == self.audience and sub else secrets.token_urlsafe(32)
        answer = {"access_token": access_token, "scope": SCOPE, "expires_in": 86400, "token_type": "Bearer"}
        if login["with_id_token"]:
            key = login["key"]
            header = {"alg": login["alg"], "typ": "JWT"}
            if key.kid:
                header["kid"] = key.kid
            answer["id_token"] = jwt.encode(header, login["claims"], key, algorithms=[login["alg"]])
        return web.json_response(answer)


def _client_credentials(authorization: str, form) -> tuple[str, str]:
    """client_secret_basic (the Authorization header), else client_secret_post (the form)."""
    scheme, _, value = authorization.partition(" ")
    if scheme.lower() == "basic":
        try:
            client_id, _, client_secret = base64.b64decode(value).decode().partition(":")
        except ValueError:
            return "", ""
        return client_id, client_secret
    return str(form.get("client_id", "")), str(form.get("client_secret", ""))


def _s256(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()


def _invalid_grant(description: str) -> web.Response:
    return web.json_response({"error": "invalid_grant", "error_description": description}, status=403)


_PAGE = """<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body {{ font-family: system-ui, sans-serif; background: #eef1f6; display: grid; place-items: center;
        min-height: 100vh; margin: 0; color: #1e293b; }}
main {{ background: #fff; padding: 2rem 2.25rem; border-radius: .5rem; width: 22rem;
        box-shadow: 0 6px 24px rgba(15, 23, 42, .12); }}
h1 {{ font-size: 1.35rem; margin-top: 0; }}
label {{ display: block; margin: .75rem 0; font-size: .9rem; }}
input {{ display: block; width: 100%; box-sizing: border-box; padding: .55rem; margin-top: .25rem;
         border: 1px solid #cbd5e1; border-radius: .25rem; font-size: 1rem; }}
button {{ width: 100%; padding: .65rem; margin-top: .5rem; border: 0; border-radius: .25rem;
          background: #635dff; color: #fff; font-size: 1rem; cursor: pointer; }}
.error {{ color: #b91c1c; }} .hint {{ color: #64748b; font-size: .8rem; margin-top: 1.25rem; }}
</style></head><body><main><h1>{title}</h1>{body}</main></body></html>
"""


def _page(title: str, body: str, *, status: int = 200) -> web.Response:
    return web.Response(text=_PAGE.format(title=html.escape(title), body=body), status=status, content_type="text/html")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="A local Auth0 tenant: sign-in page, discovery, JWKS, tokens.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8776)
    parser.add_argument("--client-id", default=CLIENT_ID)
    parser.add_argument("--client-secret", default=CLIENT_SECRET)
    parser.add_argument("--audience", default=AUDIENCE, help="the API identifier access tokens are issued for")
    args = parser.parse_args(argv)
    Auth0(
        client_id=args.client_id,
        client_secret=args.client_secret,
        audience=args.audience,
        host=args.host,
        port=args.port,
    ).serve_until_signalled()


if __name__ == "__main__":
    main()
