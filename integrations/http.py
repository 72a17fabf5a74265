"""The one HTTP client base every outside service's client builds on.

It sets connect/read timeouts and a user agent, maps failures to the job
layer's two error kinds (timeouts, connection errors, 429 and 5xx are
transient; other 4xx are permanent) and logs method, host, path, status and
duration only: never query strings, headers or bodies, which carry secrets
and personal data.
"""

import contextlib
import os
import threading
import time
from email.utils import parsedate_to_datetime
from urllib.parse import urljoin, urlsplit

import requests
import structlog
from django.conf import settings
from django.utils import timezone

from jobs.errors import PermanentError, TransientError

logger = structlog.get_logger(__name__)

# Keyword arguments of Session.request that belong to sending, not to the request itself.
_SEND_OPTIONS = ("timeout", "allow_redirects", "stream", "verify", "cert", "proxies")


def environment_ca_bundle() -> str | None:
    """The CA bundle the environment names for outgoing HTTPS, as requests reads it."""
    return os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE")


def parse_retry_after(value: str | None) -> float | None:
    """Retry-After as seconds: either delta-seconds or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        return max((parsedate_to_datetime(value) - timezone.now()).total_seconds(), 0.0)
    except (TypeError, ValueError):
        return None


class HttpClient:
    """Subclass per service: set `service`, pass the base URL, add the service's calls."""

    service = "http"
    # A semaphore shared by the clients of several threads bounds their requests in flight together
    # (the CRM sync: its threads overlap database work, the outside service sees at most N calls).
    in_flight: threading.Semaphore | None = None

    def __init__(self, base_url: str, *, connect_timeout=None, read_timeout=None, session=None):
        self.base_url = base_url.rstrip("/") + "/"
        self.timeout = (
            connect_timeout or settings.HTTP_CONNECT_TIMEOUT,
            read_timeout or settings.HTTP_READ_TIMEOUT,
        )
        self.session = session or requests.Session()
        self.session.headers["User-Agent"] = settings.HTTP_USER_AGENT
        self._read_environment_once()

    def _read_environment_once(self):
        """Proxies and CA bundle from the environment, read now instead of on every request.

        With `trust_env` requests scans all of os.environ twice per request for
        proxy variables: about 1 ms of CPU per call on this project's machines
        (bench/tracking/sync), more than the rest of the HTTP call. The result is
        the same as long as the environment does not change while the process
        runs. (.netrc credentials, the other thing trust_env reads, are not used.)
        """
        if not self.session.trust_env:
            return
        self.session.trust_env = False
        self.session.proxies.update(requests.utils.get_environ_proxies(self.base_url))
        bundle = environment_ca_bundle()
        if bundle and self.session.verify is True:
            self.session.verify = bundle

    def request(self, method: str, path: str, **kwargs) -> requests.Response:
        url = urljoin(self.base_url, path.lstrip("/"))
        kwargs.setdefault("timeout", self.timeout)
        log = logger.bind(service=self.service, method=method, host=urlsplit(url).hostname, path=urlsplit(url).path)
        started = time.monotonic()
        # Session.request split in two, so a bound on calls in flight covers the network part only.
        send_options = {name: kwargs.pop(name) for name in _SEND_OPTIONS if name in kwargs}
        prepared = self.session.prepare_request(requests.Request(method, url, **kwargs))
        try:
            with self.in_flight or contextlib.nullcontext():
                response = self.session.send(prepared, **send_options)
        except requests.Timeout as exc:
            log.warning("http_timeout", duration_ms=_ms(started))
            raise TransientError(f"{self.service}: timed out") from exc
        except requests.ConnectionError as exc:
            log.warning("http_connection_error", duration_ms=_ms(started))
            raise TransientError(f"{self.service}: connection failed") from exc
        log.info("http_request", status=response.status_code, duration_ms=_ms(started))
        status = response.status_code
        if status == 429 or status >= 500:
            raise TransientError(
                f"{self.service}: HTTP {status}",
                retry_after=parse_retry_after(response.headers.get("Retry-After")),
            )
        if status >= 400:
            raise PermanentError(f"{self.service}: HTTP {status}")
        return response

    def get(self, path, **kwargs):
        return self.request("GET", path, **kwargs)

    def post(self, path, **kwargs):
        return self.request("POST", path, **kwargs)

    def put(self, path, **kwargs):
        return self.request("PUT", path, **kwargs)

    def patch(self, path, **kwargs):
        return self.request("PATCH", path, **kwargs)

    def delete(self, path, **kwargs):
        return self.request("DELETE", path, **kwargs)


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
