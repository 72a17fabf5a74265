"""Auth0 access tokens for our API (the MCP server), verified against the tenant's JWKS.

Auth0 signs access tokens for an API with the tenant's RS256 keys, published
at `https://{AUTH0_DOMAIN}/.well-known/jwks.json`. A token is accepted only
when all of these hold: RS256 signature by a key of that set (`alg` pinned,
so `none` and HS256-with-the-public-key tricks fail), `iss` exactly the
tenant URL, our API identifier in `aud` (a string or a list), `exp` in the
future (LEEWAY_SECONDS of clock skew allowed), and a `sub`.

The key set is fetched once and kept; a token naming an unknown `kid` (Auth0
rotated its keys) fetches it again, at most once per JWKS_REFRESH_SECONDS so
a stream of forged kids cannot turn into a stream of requests to Auth0.
"""

import threading
import time

from joserfc import jws, jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet

from integrations.auth0.client import issuer_from_domain
from integrations.http import HttpClient
from jobs import PermanentError, TransientError

ALGORITHMS = ["RS256"]
JWKS_REFRESH_SECONDS = 60
LEEWAY_SECONDS = 30  # clock skew between Auth0 and us
MAX_TOKEN_BYTES = 8192  # Auth0 access tokens are about 1 KB; a larger one is not worth parsing


class InvalidAccessToken(Exception):
    """The token is not one Auth0 issued for our API, or it is no longer valid."""


class KeySetOutdated(Exception):
    """The token names a key this process does not know yet; verify again with `may_fetch`."""


class Auth0JwksClient(HttpClient):
    service = "auth0"

    def key_set(self) -> KeySet:
        answer = self.get(".well-known/jwks.json").json()
        try:
            return KeySet.import_key_set(answer)
        except (JoseError, KeyError, TypeError, ValueError) as exc:
            raise PermanentError("auth0: the JWKS answer is not a key set") from exc


class AccessTokenVerifier:
    def __init__(self, domain: str, *, audience: str):
        self.issuer = issuer_from_domain(domain)
        self.audience = audience
        self._jwks = Auth0JwksClient(self.issuer)
        self._keys: KeySet | None = None
        self._fetched_at = float("-inf")
        self._lock = threading.Lock()
        self._claims = jwt.JWTClaimsRegistry(
            leeway=LEEWAY_SECONDS,
            iss={"essential": True, "value": self.issuer},
            aud={"essential": True, "value": audience},
            exp={"essential": True},
            sub={"essential": True},
        )

    def verified_claims(self, token: str, *, may_fetch: bool = True) -> dict:
        """The token's claims once every check has passed.

        InvalidAccessToken for a token that fails any check; TransientError when the
        key set cannot be fetched (the caller answers as for an invalid token: 401).
        Without `may_fetch` no request is made: KeySetOutdated when one would be needed.
        """
        if not token or len(token) > MAX_TOKEN_BYTES:
            raise InvalidAccessToken("empty or oversized token")
        try:
            kid = jws.extract_compact(token.encode()).headers().get("kid")
        except (JoseError, ValueError) as exc:
            raise InvalidAccessToken("not a JWS compact token") from exc
        keys = self._key_set(kid, may_fetch=may_fetch)
        try:
            decoded = jwt.decode(token, keys, algorithms=ALGORITHMS)
            self._claims.validate(decoded.claims)
        except (JoseError, ValueError) as exc:
            raise InvalidAccessToken(type(exc).__name__) from exc
        if not isinstance(decoded.claims.get("sub"), str) or not decoded.claims["sub"]:
            raise InvalidAccessToken("no subject")
        return decoded.claims

    def usable_until(self, claims: dict) -> int:
        """The last second (Unix time) at which verified_claims accepts a token with these claims: `exp` plus the
        leeway. For whoever keeps a verified token and checks it against the clock again later."""
        return int(claims["exp"]) + LEEWAY_SECONDS - 1  # joserfc refuses from exp + leeway on

    def _key_set(self, kid: str | None, *, may_fetch: bool) -> KeySet:
        keys = self._keys
        if keys is not None and (_names_key(keys, kid) or not self._refresh_due()):
            return keys  # an unknown kid between refreshes fails the signature check
        if not may_fetch:
            raise KeySetOutdated()
        with self._lock:  # one fetch at a time; the others find its result
            if self._keys is None or (not _names_key(self._keys, kid) and self._refresh_due()):
                self._fetched_at = time.monotonic()
                try:
                    self._keys = self._jwks.key_set()
                except (TransientError, PermanentError):
                    if self._keys is None:
                        raise
            return self._keys

    def _refresh_due(self) -> bool:
        return time.monotonic() - self._fetched_at >= JWKS_REFRESH_SECONDS


def _names_key(keys: KeySet, kid: str | None) -> bool:
    return any(key.kid == kid for key in keys.keys) or (kid is None and len(keys.keys) == 1)
