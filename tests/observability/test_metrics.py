"""/metrics: who may read it, and what it says about requests, streams, jobs, circuit breakers, mailboxes and
the CRM sync. In the test process there is one process's registry (no PROMETHEUS_MULTIPROC_DIR); test_processes.py
runs several web processes."""

import math
import uuid
from datetime import timedelta

import pybreaker
import pytest
from django.core.cache import cache
from django.db import OperationalError, connection
from django.utils import timezone
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from docs_users.sync import SYNC_KIND
from jobs.models import Job
from standins.v0 import V0, Behaviour
from tests.prototypes.conftest import make_lead
from tests.security.test_stream_caps import progress, run
from tracking.models import Mailbox
from tracking.services import POLL_KIND, lead_write_breaker

pytestmark = pytest.mark.django_db(transaction=True)

TOKEN = "metrics-token-for-tests"


@pytest.fixture(autouse=True)
def metrics_settings(settings):
    settings.METRICS_TOKEN, settings.METRICS_ALLOWED_IPS = TOKEN, []
    settings.IMAP_HOST = ""  # no env mailbox: only the rows a test makes
    cache.clear()  # the breakers' state
    yield settings
    cache.clear()


def scrape(client, **headers) -> dict[tuple, float]:
    """{(name, sorted labels): value} of every sample /metrics answers with."""
    response = client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}", **headers})
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
    }


def sample(samples, name, **labels) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))


def test_nobody_reads_it_while_neither_a_token_nor_an_address_is_set(client, settings):
    settings.METRICS_TOKEN = ""
    assert client.get("/metrics").status_code == 404
    assert client.get("/metrics", headers={"Authorization": "Bearer "}).status_code == 404
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 404


def test_the_token_opens_it_and_a_wrong_one_is_a_404(client):
    assert client.get("/metrics").status_code == 404
    assert client.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 404
    assert client.get("/metrics", headers={"Authorization": f"Basic {TOKEN}"}).status_code == 404
    assert client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200


def test_an_allowed_address_reads_it_as_the_client_ip_helper_sees_it(client, settings):
    settings.METRICS_TOKEN = ""
    settings.METRICS_ALLOWED_IPS = ["10.0.0.0/8", "2001:db8::1"]
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="2001:db8::1").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="::ffff:10.1.2.3").status_code == 200  # dual-stack socket
    assert client.get("/metrics", REMOTE_ADDR="192.0.2.1").status_code == 404
    # Behind one trusted proxy the client is the address the proxy appended, not the proxy nor what it was sent.
    settings.TRUSTED_PROXY_COUNT = 1
    spoofed = {"HTTP_X_FORWARDED_FOR": "10.0.0.1, 198.51.100.7"}
    assert client.get("/metrics", REMOTE_ADDR="10.9.9.9", **spoofed).status_code == 404
    assert client.get("/metrics", REMOTE_ADDR="192.0.2.1", HTTP_X_FORWARDED_FOR="10.2.3.4").status_code == 200


def test_requests_are_counted_and_timed_by_route_not_path(client):
    page = uuid.uuid4()
    before = scrape(client)
    client.get("/healthz")
    status = client.get(f"/prototype/{page}/").status_code
    client.get("/no/such/page")
    after = scrape(client)

    def grew(name, **labels):
        return (sample(after, name, **labels) or 0) - (sample(before, name, **labels) or 0)

    assert grew("leadgen_http_requests_total", route="/healthz", method="GET", status="200") == 1
    assert grew("leadgen_http_request_duration_seconds_count", route="/healthz") == 1
    prototype = "/prototype/<uuid:lead_id>/"
    assert grew("leadgen_http_requests_total", route=prototype, method="GET", status=str(status)) == 1
    assert str(page) not in str(list(after)), "a path's ids never become a label"
    assert grew("leadgen_http_requests_total", route="unresolved", method="GET", status="404") == 1
    assert grew("leadgen_http_requests_total", route="/metrics", method="GET", status="200") == 1


def test_open_streams_are_counted_while_they_are_sent(settings):
    server = V0(Behaviour(stall_after=1)).start()  # the generation stalls: its stream stays open
    settings.V0_API_URL, settings.V0_API_KEY = server.url, server.behaviour.api_key
    settings.PROTOTYPES_STREAM_RATE, settings.V0_STREAM_IDLE_SECONDS = "1000/min", 2
    lead = make_lead()

    def open_streams():
        return sum(
            value.value
            for family in REGISTRY.collect()
            if family.name == "leadgen_http_streams_open"
            for value in family.samples
        )

    async def scenario():
        before = open_streams()
        first, second = await progress(lead).open(), await progress(lead, client="203.0.113.5").open()
        both = open_streams()
        await first.leave()
        one = open_streams()
        await second.leave()
        return before, both, one, open_streams()

    try:
        before, both, one, after = run(scenario)
    finally:
        server.stop()
    assert (both - before, one - before, after - before) == (2, 1, 0)


def test_jobs_pending_running_and_dead_by_kind_and_the_oldest_due(client):
    now = timezone.now()

    def job(key, status, run_after):
        Job.objects.create(kind="tests.metrics", key=f"tests.metrics:{key}", status=status, run_after=run_after)

    job("due-long", Job.Status.PENDING, now - timedelta(seconds=120))
    job("due-now", Job.Status.PENDING, now - timedelta(seconds=5))
    job("later", Job.Status.PENDING, now + timedelta(hours=1))
    job("running", Job.Status.RUNNING, now - timedelta(hours=2))
    job("dead", Job.Status.DEAD, now - timedelta(hours=3))
    job("done", Job.Status.SUCCEEDED, now - timedelta(hours=4))
    samples = scrape(client)
    counts = {status: sample(samples, "leadgen_jobs", kind="tests.metrics", status=status)
              for status in ("pending", "running", "dead")}  # fmt: skip
    assert counts == {"pending": 3, "running": 1, "dead": 1}
    assert 120 <= sample(samples, "leadgen_jobs_oldest_due_age_seconds", kind="tests.metrics") < 180
    # A registered kind without jobs keeps its series, at zero.
    assert sample(samples, "leadgen_jobs", kind=POLL_KIND, status="dead") == 0
    assert sample(samples, "leadgen_jobs_oldest_due_age_seconds", kind=POLL_KIND) == 0
    assert sample(samples, "leadgen_metrics_collector_up", collector="jobs") == 1


def test_the_circuit_breaker_state_shows(client, settings):
    name = "tracking.lead_write"
    assert sample(scrape(client), "leadgen_circuit_breaker_state", breaker=name, state="closed") == 1
    settings.LEAD_WRITE_BREAKER_FAIL_MAX = 1

    def write():
        raise OperationalError("the database went away")

    with pytest.raises(pybreaker.CircuitBreakerError):
        lead_write_breaker().call(write)
    samples = scrape(client)
    assert sample(samples, "leadgen_circuit_breaker_state", breaker=name, state="open") == 1
    assert sample(samples, "leadgen_circuit_breaker_state", breaker=name, state="closed") == 0
    assert sample(samples, "leadgen_circuit_breaker_state", breaker=name, state="half-open") == 0


def test_each_mailbox_shows_how_long_since_its_last_successful_poll(client):
    for name in ("sales", "support", "old"):
        Mailbox.objects.create(name=name, host="imap.example.com", username=name,
                               password_env_var="IMAP_PASSWORD_TEST", is_active=name != "old")  # fmt: skip
    now = timezone.now()

    def poll(mailbox, stamp, status, finished_ago):
        Job.objects.create(
            kind=POLL_KIND, key=f"{POLL_KIND}:{mailbox}:{stamp}", payload={"mailbox": mailbox}, status=status,
            finished_at=now - timedelta(seconds=finished_ago),
        )  # fmt: skip

    poll("sales", "20250101T000000", Job.Status.SUCCEEDED, 3600)
    poll("sales", "20250101T001000", Job.Status.SUCCEEDED, 600)
    poll("sales", "20250101T002000", Job.Status.DEAD, 60)  # failed since: the age goes on
    poll("support", "20250101T000000", Job.Status.DEAD, 60)
    poll("old", "20250101T000000", Job.Status.SUCCEEDED, 60)
    samples = scrape(client)
    assert 600 <= sample(samples, "leadgen_mailbox_last_successful_poll_age_seconds", mailbox="sales") < 660
    assert sample(samples, "leadgen_mailbox_last_successful_poll_age_seconds", mailbox="support") == math.inf
    assert sample(samples, "leadgen_mailbox_last_successful_poll_age_seconds", mailbox="old") is None, "inactive"


def test_the_crm_sync_last_success_time_shows(client):
    assert sample(scrape(client), "leadgen_crm_sync_last_success_timestamp_seconds") == 0
    finished = timezone.now() - timedelta(hours=5)
    Job.objects.create(kind=SYNC_KIND, key=f"{SYNC_KIND}:2025-01-01T03:00:1of2", status=Job.Status.SUCCEEDED,
                       finished_at=finished)  # fmt: skip
    Job.objects.create(kind=SYNC_KIND, key=f"{SYNC_KIND}:2025-01-02T03:00:1of2", status=Job.Status.DEAD,
                       finished_at=timezone.now())  # fmt: skip
    value = sample(scrape(client), "leadgen_crm_sync_last_success_timestamp_seconds")
    assert value == pytest.approx(finished.timestamp(), abs=0.001)


def test_a_collector_that_fails_costs_only_its_own_families(client):
    """The mailboxes' table cannot be read (here: it is away); the rest of the scrape is there."""
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE tracking_mailbox RENAME TO tracking_mailbox_away")
    try:
        samples = scrape(client)
    finally:
        with connection.cursor() as cursor:
            cursor.execute("ALTER TABLE tracking_mailbox_away RENAME TO tracking_mailbox")
    assert sample(samples, "leadgen_metrics_collector_up", collector="mailboxes") == 0
    assert sample(samples, "leadgen_metrics_collector_up", collector="jobs") == 1
    assert sample(samples, "leadgen_circuit_breaker_state", breaker="tracking.lead_write", state="closed") == 1
    assert any(name == "leadgen_http_requests_total" for name, _ in samples)
