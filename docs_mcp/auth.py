"""Bearer tokens of the MCP server: Auth0 access tokens for our API, checked as the SDK's TokenVerifier.

The SDK's bearer middleware calls `verify_token` for every request; None makes
it answer 401 with `WWW-Authenticate: Bearer error="invalid_token", ...,
resource_metadata="<SITE_URL>/.well-known/oauth-protected-resource/mcp"`, the
RFC 9728 document that names Auth0 as the authorization server.
"""

from collections import OrderedDict

import structlog
from mcp.server.auth.provider import AccessToken

from docs_mcp.threads import in_worker
from integrations.auth0.access_tokens import AccessTokenVerifier, InvalidAccessToken, KeySetOutdated
from jobs import PermanentError, TransientError

logger = structlog.get_logger(__name__)


class Auth0TokenVerifier:
    """Verifies on the event loop while the tenant's key set is known (one RS256 check, no I/O);
    fetching the key set (first token, key rotation) happens in a worker thread.

    A client sends the same token with every request of a session: a verified
    token is kept (the most recent VERIFIED_TOKENS) and not checked again. The
    SDK's bearer middleware compares `expires_at` with the clock on every
    request, without leeway of its own: it is given the last second the
    verifier accepts the token (its `exp` plus the leeway), so a token passes
    exactly as long as the verification would pass it, kept or not.
    """

    VERIFIED_TOKENS = 4096

    def __init__(self, verifier: AccessTokenVerifier):
        self.verifier = verifier
        self._verified: OrderedDict[str, AccessToken] = OrderedDict()

    async def verify_token(self, token: str) -> AccessToken | None:
        if (known := self._verified.get(token)) is not None:
            self._verified.move_to_end(token)
            return known
        access = await self._verify(token)
        if access is not None:
            self._verified[token] = access
            if len(self._verified) > self.VERIFIED_TOKENS:
                self._verified.popitem(last=False)
        return access

    async def _verify(self, token: str) -> AccessToken | None:
        try:
            try:
                claims = self.verifier.verified_claims(token, may_fetch=False)
            except KeySetOutdated:
                claims = await in_worker(self.verifier.verified_claims, token)
        except InvalidAccessToken as exc:
            logger.info("mcp_token_refused", reason=str(exc))
            return None
        except (TransientError, PermanentError) as exc:
            logger.warning("mcp_token_keys_unavailable", error=str(exc))
            return None
        scope = claims.get("scope")
        return AccessToken(
            token=token,
            client_id=str(claims.get("azp") or claims.get("client_id") or ""),
            scopes=scope.split() if isinstance(scope, str) else [],
            expires_at=self.verifier.usable_until(claims),
            resource=self.verifier.audience,
            subject=claims["sub"],
            claims=claims,
        )
