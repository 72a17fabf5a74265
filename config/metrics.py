"""Prometheus metrics: what each web process counts, and the /metrics view.

Several daphne processes serve the site and a scrape reaches one of them, so
each process writes its samples to files of its own in PROMETHEUS_MULTIPROC_DIR
(prometheus-client's multiprocess mode) and a scrape merges every process's
files (MultiProcessCollector): counters and histograms are summed, those of
processes that have exited included, and the open-streams gauge is summed
over live processes only (`livesum`): a process removes its files of it when
it exits. prometheus-client reads the variable when it loads, so it is set
before the process starts, to one directory every web process shares, emptied
when the service (not one process) starts. Unset, a scrape sees its own
process alone, which is right for one web process (`make run`).

What every process shares (jobs, circuit breakers, mailboxes, the daily sync)
is read from the database and the cache when scraped, by the collectors the
wiring layer passes to `metrics_view` (config/collectors.py), not counted in
each process.

/metrics answers an address METRICS_ALLOWED_IPS covers (the client's address
as foundation.client_ip reads it) and `Authorization: Bearer METRICS_TOKEN`; to
anyone else, and to everyone while neither is set, it is a 404 like any
unknown path.
"""

import atexit
import contextlib
import ipaddress
import os
import time
from collections.abc import Callable, Iterable

import structlog
from django.conf import settings
from django.http import Http404
from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram, multiprocess
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.django import PrometheusDjangoView

from foundation.client_ip import client_ip
from foundation.secrets import bearer_token, secret_matches

logger = structlog.get_logger(__name__)

MULTIPROCESS_DIR = os.environ.get("PROMETHEUS_MULTIPROC_DIR", "")

# The route label: the URL pattern a request resolved to, so a path's ids and slugs never make new series.
UNRESOLVED = "unresolved"  # answered before or without a URL pattern: an unknown path, a redirect, a refusal
# Any other method a client sends is counted as "other": the label's values stay a known few.
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})

REQUESTS = Counter(
    "leadgen_http_requests", "Requests answered by Django, by route, method and status.", ["route", "method", "status"]
)
DURATION = Histogram(
    "leadgen_http_request_duration_seconds",
    "Time from the request reaching Django to its response (a stream's: until the stream starts), by route.",
    ["route"],
)
STREAMS_OPEN = Gauge(
    "leadgen_http_streams_open",
    "Streaming responses being sent (progress streams, chat answers), by route.",
    ["route"],
    multiprocess_mode="livesum",
)

if MULTIPROCESS_DIR:
    # A process that exits (daphne on SIGTERM) takes its open-streams gauge with it; its counters stay, as a
    # counter must. One killed outright leaves its gauge behind until the directory is emptied.
    atexit.register(lambda: multiprocess.mark_process_dead(os.getpid()))


class RequestMetricsMiddleware:
    """Counts and times every request by the route it resolved to. First in MIDDLEWARE, so the time is
    everything Django does. Sync only, like the whole middleware chain under daphne (config/asgi_handler.py)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        started = time.perf_counter()
        response = self.get_response(request)
        match = request.resolver_match
        route = f"/{match.route}" if match else UNRESOLVED
        method = request.method if request.method in METHODS else "other"
        DURATION.labels(route).observe(time.perf_counter() - started)
        REQUESTS.labels(route, method, str(response.status_code)).inc()
        if response.streaming:
            response.streaming_content = _counted_while_sent(response, route)
        return response


def _counted_while_sent(response, route: str):
    """The response's body, counted in STREAMS_OPEN from its first chunk until it ends however it ends
    (finished, the client gone, failed); closing it closes the body it wraps."""
    content = response.streaming_content
    gauge = STREAMS_OPEN.labels(route)
    if response.is_async:

        async def sent():
            gauge.inc()
            try:
                async with contextlib.aclosing(content) as body:
                    async for chunk in body:
                        yield chunk
            finally:
                gauge.dec()

    else:  # the response closes what it wraps itself, and then this (Django's resource closers)

        def sent():
            gauge.inc()
            try:
                yield from content
            finally:
                gauge.dec()

    return sent()


def scrape_allowed(request) -> bool:
    if secret_matches(bearer_token(request), settings.METRICS_TOKEN):
        return True
    ip = client_ip(request)
    if ip is None:
        return False
    address = ipaddress.ip_address(ip)
    if address.version == 6 and address.ipv4_mapped:  # an IPv4 client of a dual-stack socket
        address = address.ipv4_mapped
    return any(address in ipaddress.ip_network(entry.strip(), strict=False) for entry in settings.METRICS_ALLOWED_IPS)


class _SharedState:
    """The families read at scrape time, each reader on its own: one that fails (the database is down) costs
    its own families only, and `leadgen_metrics_collector_up` says which."""

    def __init__(self, readers: dict[str, Callable[[], Iterable[Metric]]]):
        self.readers = readers

    def collect(self):
        up = GaugeMetricFamily(
            "leadgen_metrics_collector_up", "Whether the scrape read this shared state (1) or failed to (0).",
            labels=["collector"],
        )  # fmt: skip
        for name, read in self.readers.items():
            try:
                families = list(read())
            except Exception as exc:
                logger.warning("metrics_collector_failed", collector=name, error=type(exc).__name__)
                up.add_metric([name], 0)
                continue
            up.add_metric([name], 1)
            yield from families
        yield up


def metrics_view(readers: dict[str, Callable[[], Iterable[Metric]]]):
    """The /metrics view: every web process's counters (merged from PROMETHEUS_MULTIPROC_DIR when set, else
    this process's) and the families `readers` read at scrape time, {name: function returning families}."""
    registry = CollectorRegistry()
    if MULTIPROCESS_DIR:
        multiprocess.MultiProcessCollector(registry)
    else:
        registry.register(REGISTRY)
    registry.register(_SharedState(readers))
    exposition = PrometheusDjangoView.as_view(registry=registry)

    def metrics(request):
        if not scrape_allowed(request):
            raise Http404
        return exposition(request)

    return metrics
