"""A local Auth0 tenant's OpenID Connect endpoints on pytest-httpserver, in Auth0's shapes.

- `GET /.well-known/openid-configuration`: the discovery document (Auth0's fields, trimmed);
- `GET /.well-known/jwks.json`: the public half of one RS256 signing key;
- `POST /oauth/token`: the authorization code grant with client_secret_basic and PKCE (S256),
  answering `{"access_token", "id_token", "scope", "expires_in", "token_type"}` or, like Auth0,
  403 `{"error": "invalid_grant", ...}` / 401 `{"error": "access_denied", ...}`.

Auth0's login page is played by `log_in(authorize_url, ...)`: it checks the authorize request as
Auth0 would and returns the query the browser brings back to the callback (`code`, `state`). The ID
token is signed when the code is exchanged, with the nonce of that authorize request, unless the
test asks for a bad one.
"""

import base64
import hashlib
import json
import secrets
import time
from urllib.parse import parse_qs, urlsplit

from joserfc import jwt
from joserfc.jwk import OctKey, RSAKey
from werkzeug import Request, Response

SCOPE = "openid profile email"


def rsa_signing_key(kid: str) -> RSAKey:
    return RSAKey.generate_key(2048, parameters={"kid": kid, "use": "sig", "alg": "RS256"})


class FakeAuth0:
    def __init__(self, httpserver, *, client_id: str, client_secret: str, signing_key: RSAKey):
        self.issuer = httpserver.url_for("/")
        self.client_id = client_id
        self.client_secret = client_secret
        self.signing_key = signing_key
        self.token_requests = 0
        self._logins = {}  # code -> what the token request must match and the ID token to sign
        httpserver.expect_request("/.well-known/openid-configuration", method="GET").respond_with_json(
            self.discovery_document()
        )
        httpserver.expect_request("/.well-known/jwks.json", method="GET").respond_with_json(
            {"keys": [signing_key.as_dict(private=False)]}
        )
        httpserver.expect_request("/oauth/token", method="POST").respond_with_handler(self._token)

    @property
    def domain(self) -> str:
        """AUTH0_DOMAIN for this tenant: http://localhost:port."""
        return self.issuer.rstrip("/")

    def discovery_document(self) -> dict:
        return {
            "issuer": self.issuer,
            "authorization_endpoint": f"{self.issuer}authorize",
            "token_endpoint": f"{self.issuer}oauth/token",
            "userinfo_endpoint": f"{self.issuer}userinfo",
            "jwks_uri": f"{self.issuer}.well-known/jwks.json",
            "end_session_endpoint": f"{self.issuer}oidc/logout",
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
        """The user signs in on Auth0's page: the query Auth0 sends the browser back to the callback with.

        `profile` is the user's claims (sub, email, names, org_name); `claims` overrides or, with None,
        removes standard claims of the ID token; `sign_with` and `alg` sign it with another key.
        """
        url = urlsplit(authorize_url)
        assert f"{url.scheme}://{url.netloc}{url.path}" == f"{self.issuer}authorize"
        query = {name: values[0] for name, values in parse_qs(url.query).items()}
        assert query["response_type"] == "code"
        assert query["client_id"] == self.client_id
        assert set(query["scope"].split()) >= {"openid", "email", "profile"}
        assert query["code_challenge_method"] == "S256"
        now = int(time.time())
        id_token_claims = {
            "iss": self.issuer,
            "aud": self.client_id,
            "iat": now,
            "exp": now + 36000,
            "nonce": query["nonce"],
            "sid": secrets.token_urlsafe(16),
            "email_verified": True,
            **profile,
        }
        for name, value in (claims or {}).items():
            if value is None:
                id_token_claims.pop(name, None)
            else:
                id_token_claims[name] = value
        code = secrets.token_urlsafe(24)
        self._logins[code] = {
            "redirect_uri": query["redirect_uri"],
            "code_challenge": query["code_challenge"],
            "claims": id_token_claims,
            "key": sign_with or self.signing_key,
            "alg": alg,
            "with_id_token": with_id_token,
        }
        return {"code": code, "state": query["state"]}

    def _token(self, request: Request) -> Response:
        self.token_requests += 1
        auth = request.authorization
        if not auth or (auth.username, auth.password) != (self.client_id, self.client_secret):
            return _json({"error": "access_denied", "error_description": "Unauthorized"}, status=401)
        form = request.form
        login = self._logins.pop(form.get("code", ""), None)  # a code is good once
        if form.get("grant_type") != "authorization_code" or login is None:
            return _json({"error": "invalid_grant", "error_description": "Invalid authorization code"}, status=403)
        if form.get("redirect_uri") != login["redirect_uri"]:
            return _json({"error": "invalid_grant", "error_description": "redirect_uri mismatch"}, status=403)
        if _s256(form.get("code_verifier", "")) != login["code_challenge"]:
            return _json({"error": "invalid_grant", "error_description": "Failed to verify code verifier"}, status=403)
        answer = {
            "access_token": secrets.token_urlsafe(32),
            "scope": SCOPE,
            "expires_in": 86400,
            "token_type": "Bearer",
        }
        if login["with_id_token"]:
            key = login["key"]
            header = {"alg": login["alg"], "typ": "JWT"}
            if key.kid:
                header["kid"] = key.kid
            answer["id_token"] = jwt.encode(header, login["claims"], key, algorithms=[login["alg"]])
        return _json(answer)


def _s256(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()


def _json(body: dict, *, status: int = 200) -> Response:
    return Response(json.dumps(body), status=status, content_type="application/json")
