"""Server-side reCAPTCHA v3 verification through Google's siteverify endpoint.

The API (https://developers.google.com/recaptcha/docs/verify, .../docs/v3):
POST form-encoded `secret`, `response` (the browser's token) and optional
`remoteip`; the answer is JSON `{success, score, action, challenge_ts,
hostname, "error-codes"}`. Google only says whether the token is genuine; the
score threshold, the expected action and the hostname are ours to check.

This runs in the request path, so it never raises: every outcome, an outage
included, is a `RecaptchaResult`. An outage fails closed with
`recaptcha_unavailable`, because accepting unverified traffic whenever Google
is slow would let a bot through by simply being lucky with timing.
"""

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace

import structlog
from django.conf import settings
from django.http.request import validate_host

from integrations.http import HttpClient
from jobs import PermanentError, TransientError

logger = structlog.get_logger(__name__)

RECAPTCHA_FAILED = "recaptcha_failed"
RECAPTCHA_LOW_SCORE = "recaptcha_low_score"
RECAPTCHA_ACTION_MISMATCH = "recaptcha_action_mismatch"
RECAPTCHA_HOSTNAME_MISMATCH = "recaptcha_hostname_mismatch"
RECAPTCHA_UNAVAILABLE = "recaptcha_unavailable"

# Google's codes that mean our secret is wrong, not that the visitor is a bot.
_SECRET_ERROR_CODES = {"missing-input-secret", "invalid-input-secret"}


@dataclass(frozen=True)
class RecaptchaResult:
    ok: bool
    error_code: str | None = None  # one of the RECAPTCHA_* codes when not ok
    score: float | None = None
    action: str = ""
    hostname: str = ""
    google_error_codes: tuple[str, ...] = ()


class RecaptchaClient(HttpClient):
    service = "recaptcha"

    def __init__(self, secret_key: str, *, verify_url: str, timeout_seconds: float):
        base_url, _, self.endpoint = verify_url.rpartition("/")
        super().__init__(base_url, connect_timeout=timeout_seconds, read_timeout=timeout_seconds)
        self.secret_key = secret_key

    def verify(
        self,
        token: str,
        *,
        remote_ip: str | None = None,
        expected_action: str,
        min_score: float,
        expected_hostnames: Iterable[str],
    ) -> RecaptchaResult:
        """Check the token with Google, then its hostname, action and score.

        `expected_hostnames` takes ALLOWED_HOSTS patterns (`.example.com`
        matches its subdomains, `*` anything); an empty list skips the
        hostname check (for keys whose domain Google already checks). Never raises.
        """
        if not token:
            return RecaptchaResult(ok=False, error_code=RECAPTCHA_FAILED)
        form = {"secret": self.secret_key, "response": token}
        if remote_ip:
            form["remoteip"] = remote_ip
        try:
            answer = self.post(self.endpoint, data=form).json()
        except (TransientError, PermanentError, ValueError) as exc:
            logger.warning("recaptcha_unavailable", error=str(exc) or type(exc).__name__)
            return RecaptchaResult(ok=False, error_code=RECAPTCHA_UNAVAILABLE)
        if not isinstance(answer, dict):
            logger.warning("recaptcha_unavailable", error="answer is not a JSON object")
            return RecaptchaResult(ok=False, error_code=RECAPTCHA_UNAVAILABLE)

        google_error_codes = tuple(str(code) for code in answer.get("error-codes") or ())
        score = answer.get("score")
        result = RecaptchaResult(
            ok=False,
            score=float(score) if _is_number(score) else None,
            action=str(answer.get("action") or ""),
            hostname=str(answer.get("hostname") or ""),
            google_error_codes=google_error_codes,
        )
        if answer.get("success") is not True:
            if _SECRET_ERROR_CODES.intersection(google_error_codes):
                # Our configuration is broken: say so loudly, and do not blame the visitor.
                logger.error("recaptcha_secret_rejected", google_error_codes=google_error_codes)
                return _failed(result, RECAPTCHA_UNAVAILABLE)
            return _failed(result, RECAPTCHA_FAILED)
        allowed_hostnames = list(expected_hostnames)
        if allowed_hostnames and not validate_host(result.hostname.lower(), allowed_hostnames):
            return _failed(result, RECAPTCHA_HOSTNAME_MISMATCH)
        if result.action != expected_action:
            return _failed(result, RECAPTCHA_ACTION_MISMATCH)
        if result.score is None:
            # A v2 token carries no score: the site key is not a v3 key.
            return _failed(result, RECAPTCHA_FAILED)
        if result.score < min_score:
            return _failed(result, RECAPTCHA_LOW_SCORE)
        return replace(result, ok=True)


def client_from_settings() -> RecaptchaClient | None:
    """None when RECAPTCHA_SECRET_KEY is empty: the caller decides whether to skip the check."""
    if not settings.RECAPTCHA_SECRET_KEY:
        return None
    return RecaptchaClient(
        settings.RECAPTCHA_SECRET_KEY,
        verify_url=settings.RECAPTCHA_VERIFY_URL,
        timeout_seconds=settings.RECAPTCHA_TIMEOUT_SECONDS,
    )


def _failed(result: RecaptchaResult, error_code: str) -> RecaptchaResult:
    logger.info("recaptcha_rejected", error_code=error_code, score=result.score, action=result.action)
    return replace(result, error_code=error_code)


def _is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
