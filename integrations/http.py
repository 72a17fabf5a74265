"""The one HTTP client base every outside service's client builds on, over urllib3.

- Connect and read timeouts from settings (HTTP_CONNECT_TIMEOUT,
  HTTP_READ_TIMEOUT) unless the client or the call sets its own; no retries
  (the job layer retries, request-path callers fall back); redirects followed
  unless `allow_redirects=False`; our user agent on every call; no cookies kept.
- One connection pool per client, thread-safe: a client can be shared by every
  thread of a process. Proxies and the CA bundle come from the environment as
  requests reads them (HTTP(S)_PROXY, ALL_PROXY, NO_PROXY; REQUESTS_CA_BUNDLE,
  CURL_CA_BUNDLE, else certifi's bundle), read once when the client is made.
- Failures map to the job layer's two kinds: timeouts, connection errors, 429
  and 5xx are TransientError (with the answer's Retry-After); other 4xx are
  PermanentError. Streamed bodies (`stream=True`) map their read errors the same way.
- One log line per call, `http_request` (status) or `http_timeout` /
  `http_connection_error`, with service, method, host, path and duration only:
  never query strings, headers or bodies, which carry secrets and personal data.

urllib3 rather than requests: the classifier call runs on every intake request,
and requests' own per-call work (request preparation, cookie jar, hooks, the
response object) costs more CPU than the HTTP exchange underneath it (1.2 ms
against 0.5 ms per call, bench/intake).

Two clients ride on another library's HTTP stack instead, because that library
does the protocol: Auth0 login (authlib, over requests) and email (anymail's
Mailgun backend, over requests). They map their library's errors to the same two
kinds (integrations/auth0/client.py, integrations/mail.py) and log failures with
host and path as here (`log_failed_call`). The sales agent's streams are async
(integrations/agent: aiohttp) and keep the same mapping and host-and-path
logging with their own events.
"""

import contextlib
import json as jsonlib
import os
import threading
import time
from collections.abc import Iterator, Mapping
from email.utils import parsedate_to_datetime
from urllib.parse import unquote, urlencode, urljoin, urlsplit

import certifi
import structlog
import urllib3
from django.conf import settings
from django.utils import timezone
from requests.utils import get_environ_proxies
from urllib3 import exceptions as errors
from urllib3.util import make_headers

from jobs import PermanentError, TransientError

logger = structlog.get_logger(__name__)

# As requests: at most 30 redirects, and never a retry of a failed connection, read or status.
MAX_REDIRECTS = 30
_FOLLOW_REDIRECTS = urllib3.Retry(total=None, connect=0, read=0, status=0, other=0, redirect=MAX_REDIRECTS)
_NO_REDIRECTS = urllib3.Retry(False)
_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
# urllib3 decodes these itself (brotli and zstd too when their packages are installed).
_ACCEPT_ENCODING = make_headers(accept_encoding=True)["accept-encoding"]


class HttpTimeoutError(TransientError):
    """The service did not connect or answer within the timeout."""


def environment_ca_bundle() -> str | None:
    """The CA bundle (file or directory) the environment names for outgoing HTTPS, as requests reads it."""
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


class HttpResponse:
    """What callers read of an answer: status, headers (case-insensitive), body.

    With `stream=True` the body is read on demand (`iter_content`, `content`);
    close the response (or use it as a context manager) when not reading it all.
    """

    __slots__ = ("status_code", "headers", "_raw", "_content", "_where")

    def __init__(self, raw: urllib3.BaseHTTPResponse, *, streamed: bool, where: dict):
        self.status_code: int = raw.status
        self.headers: urllib3.HTTPHeaderDict = raw.headers
        self._raw = raw
        self._content: bytes | None = None if streamed else raw.data
        self._where = where

    @property
    def content(self) -> bytes:
        if self._content is None:
            self._content = b"".join(self.iter_content())
        return self._content

    @property
    def encoding(self) -> str | None:
        """The charset the Content-Type names, if any."""
        for param in self.headers.get("Content-Type", "").split(";")[1:]:
            name, _, value = param.partition("=")
            if name.strip().lower() == "charset" and value.strip(' "'):
                return value.strip(' "')
        return None

    @property
    def text(self) -> str:
        """The body decoded with the declared charset, UTF-8 when none is declared."""
        try:
            return self.content.decode(self.encoding or "utf-8", errors="replace")
        except LookupError:  # a charset Python does not know
            return self.content.decode("utf-8", errors="replace")

    def json(self):
        """The body as JSON; ValueError when it is not JSON."""
        return jsonlib.loads(self.content)

    @property
    def is_redirect(self) -> bool:
        return self.status_code in _REDIRECT_STATUSES and "Location" in self.headers

    def iter_content(self, chunk_size: int = 64 * 1024) -> Iterator[bytes]:
        """The (decompressed) body in chunks; a read that fails is a TransientError, as a failed call is."""
        if self._content is not None:
            yield self._content
            return
        started = time.monotonic()
        try:
            yield from self._raw.stream(chunk_size, decode_content=True)
        except errors.HTTPError as exc:  # a timeout, the connection dropped, a broken chunk or compression
            raise _failure(exc, self._where, started) from exc
        finally:
            self.close()

    def close(self) -> None:
        """Give the connection back to the pool; one with body left unread is closed instead."""
        if not self._raw.isclosed():
            self._raw.close()
        self._raw.release_conn()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()


def is_transient_status(status: int) -> bool:
    """An HTTP status worth retrying (429 and 5xx): every client of an outside service maps statuses so."""
    return status == 429 or status >= 500


class HttpClient:
    """Subclass per service: set `service`, pass the base URL, add the service's calls.

    `headers` go on every call (a call's own `headers=` override them); set a
    service's credentials there. Calls take `params=`, `json=`, `data=` (bytes,
    str, or a form mapping, sent urlencoded), `headers=`, `allow_redirects=`,
    `timeout=` (seconds, or a (connect, read) pair) and `stream=`.
    """

    service = "http"
    # Connections kept open per host, shared by the client's threads (beyond it a
    # connection is opened and dropped per call rather than waited for); `pool_size=` sets it per client.
    pool_size = 10
    # A semaphore shared by the clients of several threads bounds their requests in flight together
    # (the CRM sync: its threads overlap database work, the outside service sees at most N calls).
    in_flight: threading.Semaphore | None = None

    def __init__(
        self,
        base_url: str,
        *,
        connect_timeout: float | None = None,
        read_timeout: float | None = None,
        pool_size: int | None = None,
    ):
        self.base_url = base_url.rstrip("/") + "/"
        self.timeout = (
            connect_timeout or settings.HTTP_CONNECT_TIMEOUT,
            read_timeout or settings.HTTP_READ_TIMEOUT,
        )
        self.headers = urllib3.HTTPHeaderDict(
            {"User-Agent": settings.HTTP_USER_AGENT, "Accept-Encoding": _ACCEPT_ENCODING}
        )
        self._pools = _pools_from_environment(
            self.base_url,
            maxsize=pool_size or self.pool_size,
            timeout=urllib3.Timeout(connect=self.timeout[0], read=self.timeout[1]),
        )

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping | None = None,
        json=None,
        data=None,
        headers: Mapping[str, str] | None = None,
        allow_redirects: bool = True,
        timeout: float | tuple[float, float] | None = None,
        stream: bool = False,
    ) -> HttpResponse:
        url = urljoin(self.base_url, path.lstrip("/"))
        parts = urlsplit(url)
        where = {"service": self.service, "method": method, "host": parts.hostname, "path": parts.path}
        pool = self._pools.get(parts.scheme)
        if pool is None or not parts.hostname:
            raise PermanentError(f"{self.service}: not an http(s) URL")
        if params:
            query = urlencode([(name, value) for name, value in params.items() if value is not None], doseq=True)
            url = f"{url}{'&' if parts.query else '?'}{query}" if query else url
        sent_headers = self.headers.copy()
        body = None
        if json is not None:
            body = jsonlib.dumps(json, allow_nan=False).encode()
            sent_headers["Content-Type"] = "application/json"
        elif isinstance(data, Mapping | list | tuple):
            body = urlencode(data, doseq=True).encode()
            sent_headers["Content-Type"] = "application/x-www-form-urlencoded"
        elif data is not None:
            body = data.encode() if isinstance(data, str) else data
        if headers:
            sent_headers.update(headers)
        options = {}
        if timeout is not None:
            connect, read = timeout if isinstance(timeout, tuple) else (timeout, timeout)
            options["timeout"] = urllib3.Timeout(connect=connect, read=read)

        started = time.monotonic()
        try:
            with self.in_flight or contextlib.nullcontext():
                raw = pool.urlopen(
                    method,
                    url,
                    body=body,
                    headers=sent_headers,
                    retries=_FOLLOW_REDIRECTS if allow_redirects else _NO_REDIRECTS,
                    redirect=allow_redirects,
                    preload_content=not stream,
                    **options,
                )
        except errors.HTTPError as exc:
            raise _failure(exc, where, started) from exc
        logger.info("http_request", **where, status=raw.status, duration_ms=_ms(started))
        response = HttpResponse(raw, streamed=stream, where=where)
        self.raise_for_status(response)
        return response

    def raise_for_status(self, response: HttpResponse) -> None:
        """429 and 5xx as TransientError, other 4xx as PermanentError.

        A service whose error bodies carry a code the caller acts on overrides
        this, reads the body (still unread here with `stream=True`) and falls
        back to it.
        """
        status = response.status_code
        if is_transient_status(status):
            response.close()
            raise TransientError(
                f"{self.service}: HTTP {status}",
                retry_after=parse_retry_after(response.headers.get("Retry-After")),
            )
        if status >= 400:
            response.close()
            raise PermanentError(f"{self.service}: HTTP {status}")

    def get(self, path, **kwargs) -> HttpResponse:
        return self.request("GET", path, **kwargs)

    def post(self, path, **kwargs) -> HttpResponse:
        return self.request("POST", path, **kwargs)

    def put(self, path, **kwargs) -> HttpResponse:
        return self.request("PUT", path, **kwargs)

    def patch(self, path, **kwargs) -> HttpResponse:
        return self.request("PATCH", path, **kwargs)

    def delete(self, path, **kwargs) -> HttpResponse:
        return self.request("DELETE", path, **kwargs)


def log_failed_call(
    service: str, *, method: str | None, url: str | None, status: int | None = None, timed_out: bool = False
) -> None:
    """For a client on another library's HTTP stack: the line HttpClient logs for a call that failed."""
    parts = urlsplit(url or "")
    where = {"service": service, "method": method, "host": parts.hostname, "path": parts.path}
    if status is not None:
        logger.warning("http_request", **where, status=status)
    else:
        logger.warning("http_timeout" if timed_out else "http_connection_error", **where)


def _failure(exc: errors.HTTPError, where: dict, started: float) -> Exception:
    """A call that got no answer as the job layer's error kind, logged."""
    service = where["service"]
    if isinstance(exc, errors.MaxRetryError):  # how urllib3 wraps the failure of a call that follows redirects
        if isinstance(exc.reason, errors.ResponseError):  # too many redirects
            logger.warning("http_too_many_redirects", **where, duration_ms=_ms(started))
            return PermanentError(f"{service}: more than {MAX_REDIRECTS} redirects")
        exc = exc.reason
    if isinstance(exc, errors.LocationValueError):  # a URL urllib3 cannot parse: retrying cannot help
        logger.warning("http_connection_error", **where, duration_ms=_ms(started))
        return PermanentError(f"{service}: not a valid URL")
    # urllib3 makes a refused connection a subclass of its connect timeout.
    if isinstance(exc, errors.TimeoutError) and not isinstance(exc, errors.NewConnectionError):
        logger.warning("http_timeout", **where, duration_ms=_ms(started))
        return HttpTimeoutError(f"{service}: timed out")
    logger.warning("http_connection_error", **where, duration_ms=_ms(started))
    return TransientError(f"{service}: connection failed")


def _pools_from_environment(base_url: str, **options) -> dict[str, urllib3.PoolManager]:
    """A pool per URL scheme: through the proxy the environment names for it, or direct.

    NO_PROXY is matched against the base URL's host, as requests matches it
    against the host of each call.
    """
    bundle = environment_ca_bundle() or certifi.where()
    options["retries"] = False
    options["ca_cert_dir" if os.path.isdir(bundle) else "ca_certs"] = bundle
    proxies = get_environ_proxies(base_url)
    made: dict[str | None, urllib3.PoolManager] = {}
    pools = {}
    for scheme in ("http", "https"):
        proxy = proxies.get(scheme) or proxies.get("all")
        if proxy not in made:
            made[proxy] = _proxy_pool(proxy, **options) if proxy else urllib3.PoolManager(**options)
        pools[scheme] = made[proxy]
    return pools


def _proxy_pool(proxy: str, **options) -> urllib3.ProxyManager:
    # Credentials in the proxy's URL become Proxy-Authorization, as requests sends them.
    userinfo = urlsplit(proxy)
    if userinfo.username:
        credentials = f"{unquote(userinfo.username)}:{unquote(userinfo.password or '')}"
        options["proxy_headers"] = make_headers(proxy_basic_auth=credentials)
    return urllib3.ProxyManager(proxy, **options)


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
