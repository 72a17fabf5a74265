"""Signed generic-JSON webhooks to leads against POST /api/leads, on daphne + PostgreSQL, in one run.

    scripts/with-services .venv/bin/python bench/sources/run.py [--rounds 3] [--duration 8]

The same web processes as bench/intake (`--daphne-procs` daphne processes, the
project's settings) serve both endpoints; standins.llm is the
classifier upstream and answers at once (--upstream-ms). A generic-JSON inbound
source (Standard Webhooks, a `whsec_` secret, confirmation emails on, so its leads
set off the same jobs as the web form's) is created in the fresh database first. Each
webhook is built and signed by `standins.platforms.generic_webhook`, with a
fresh `webhook-id`, at the moment it is sent. Phases alternate between the two
endpoints, --concurrency (32) clients each:

  target: webhook leads/s >= --target-ratio (0.8) x intake leads/s (medians over the
          rounds), zero errors on either endpoint.

After every phase the rows are checked against the 200s the clients counted:
Lead rows (of the endpoint's channel, classified by the LLM) and, per job kind,
one Job row per lead; for the webhooks also one request-log row (outcome
`created`) and one dedup row per webhook, each naming the lead whose email
carries the webhook's id. After the phases, --retries webhooks are sent again
and must make no lead. Then, with daphne stopped, --profile-count requests per
endpoint run in a fresh process to split the CPU a request costs into its parts.
--variant-root runs a changed copy of the project beside it (A/B). See
bench/sources/README.md.

Exit status: 0 target met, 1 target missed, 2 a check failed (rows missing or
extra, a retry made a lead) or the bench could not run.
"""

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Run as a script, Python puts bench/sources/ first on the path; the project root is what we want.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(ROOT))
os.chdir(ROOT)

OUT_DIR = ROOT / "bench" / "sources" / "out"  # git-ignored: daphne and fake LLM logs, the profile
RESULTS = ROOT / "bench" / "sources" / "results.json"
BIN = Path(sys.executable).parent
INTAKE_PATH = "/api/leads"
ENDPOINTS = ("intake", "webhook")
# What a web-form lead sets off (leadgen.services.lead_fan_out); more kinds may join them, alike for both.
LEAD_JOB_KINDS = {"leadgen.lead_alert", "leadgen.pipedrive_sync", "leadgen.confirmation_email"}
EMAIL_DOMAIN = "bench.example.com"


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3, help="rounds; the order alternates (default 3)")
    parser.add_argument("--duration", type=float, default=8.0, help="measured seconds per phase (default 8)")
    parser.add_argument("--warmup", type=float, default=2.0, help="unmeasured seconds before each phase (default 2)")
    parser.add_argument("--concurrency", type=int, default=32, help="concurrent clients (default 32, as intake's)")
    parser.add_argument("--upstream-ms", type=float, default=0.0,
                        help="classifier delay (default 0: answers at once, as intake's scenario 1)")  # fmt: skip
    parser.add_argument("--target-ratio", type=float, default=0.8, help="webhook/intake target (default 0.8)")
    parser.add_argument("--daphne-procs", type=int, default=2,
                        help="daphne processes, each on its own port; the clients are spread over them as a load "
                             "balancer would (default 2, as bench/intake)")  # fmt: skip
    parser.add_argument("--daphne-env", action="append", default=[], metavar="NAME=VALUE",
                        help="extra environment for daphne (repeatable)")  # fmt: skip
    parser.add_argument("--variant-root", type=Path, default=None,
                        help="also run a second set of daphne processes on the code in this directory (a copy of the "
                             "project with a change), every phase on both, interleaved: A/B under the same machine "
                             "load (daphne imports from its working directory first: it runs from there)")  # fmt: skip
    parser.add_argument("--variant-env", action="append", default=[], metavar="NAME=VALUE",
                        help="extra environment for the variant's daphne processes (repeatable); alone, the variant "
                             "runs the project's own code")  # fmt: skip
    parser.add_argument("--retries", type=int, default=100,
                        help="webhooks sent again afterwards: a retry must make no lead (default 100)")  # fmt: skip
    parser.add_argument("--profile-only", action="store_true", help=argparse.SUPPRESS)  # run.py's own subprocess
    parser.add_argument("--source", default="", help=argparse.SUPPRESS)  # the profile subprocess's source
    parser.add_argument("--profile-count", type=int, default=100,
                        help="requests per endpoint for the in-process CPU profile (0: skip; default 100)")  # fmt: skip
    parser.add_argument("--results", type=Path, default=RESULTS,
                        help=f"JSON output (default {RESULTS.relative_to(ROOT)})")  # fmt: skip
    return parser.parse_args()


ARGS = parse_args() if __name__ == "__main__" else None  # before Django is set up: --help needs no servers


from bench.common import free_port  # noqa: E402  (stdlib only at import; Django is set up below)

FAKE_PORT = int(os.environ.get("BENCH_FAKE_PORT") or free_port())
FAKE_URL = f"http://127.0.0.1:{FAKE_PORT}"
# daphne and this process (migrations, the source row, row checks, in-process profile) see the same configuration.
BENCH_ENV = {
    "DJANGO_SETTINGS_MODULE": "config.settings",
    "PYTHONPATH": str(ROOT),
    "LLM_BASE_URL": f"{FAKE_URL}/v1",
    "LLM_API_KEY": "bench-key",
    "LLM_MODEL": "bench-model",
    "RECAPTCHA_SECRET_KEY": "",  # reCAPTCHA unconfigured: skipped, like every integration that is not set
    # Both throttles run as in production (one counter per client and window) but never refuse: every
    # request comes from 127.0.0.1.
    "LEADS_THROTTLE_RATE": "1000000/s",
    "SOURCES_THROTTLE_RATE": "1000000/s",
    "MAX_CONNECTIONS_PER_IP": "0",  # likewise: no cap on one address's connections
    "LOG_LEVEL": "WARNING",
    "DEBUG": "false",
}
os.environ.update(BENCH_ENV)

import django  # noqa: E402

django.setup()

import aiohttp  # noqa: E402
from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.db.models import Count, F, Value  # noqa: E402
from django.db.models.functions import Concat  # noqa: E402

from bench.common import (  # noqa: E402
    BenchError,
    CpuMeter,
    check_services,
    machine_info,
    percentile,
    run,
    start_process,
    stop_process,
    wait_http,
)
from bench.daphne import (  # noqa: E402
    Sampler,
    Server,
    daphne_overrides,
    form_request,
    http_json,
    load,
    server_counters,
)  # noqa: E402
from jobs.models import Job  # noqa: E402
from leadgen.models import Lead  # noqa: E402
from sources.models import InboundLead, InboundRequest, InboundSource  # noqa: E402
from standins.platforms import generic_webhook, standard_webhooks_secret  # noqa: E402


def bench_info():
    import asgiref
    import daphne
    import rest_framework
    import standardwebhooks

    with connection.cursor() as cursor:
        cursor.execute("SHOW max_connections")
        pg_max_connections = int(cursor.fetchone()[0])
    return machine_info(
        djangorestframework=rest_framework.VERSION,
        daphne=daphne.__version__,
        asgiref=asgiref.__version__,
        aiohttp=aiohttp.__version__,
        standardwebhooks=getattr(standardwebhooks, "__version__", "?"),
        postgres_max_connections=pg_max_connections,
        server=f"{ARGS.daphne_procs} daphne process(es) serving both endpoints",
        daphne_env_overrides=daphne_overrides(ARGS.daphne_env),
        database_pool_per_process=dict(settings.DATABASES["default"].get("OPTIONS", {}).get("pool") or {}),
        loadavg_at_end=None,
    )


# --- what the clients send -------------------------------------------------------------------------

PERSON = {
    "last_name": "Lovelace",
    "phone": "+1 415 555 2671",
    "company": "Analytical Engines Ltd",
    "message": "We would like help automating our invoicing and reporting; about 40 people use the current tool.",
}


def webhook_request(secret: str, tag: str, n: int) -> tuple[bytes, dict]:
    """The same person as a system posting to a generic source sends it, in the default mapping's names,
    signed now; its webhook-id names the lead it must make (the email holds it too)."""
    webhook_id = f"{tag}-{n}"
    sent = generic_webhook(
        secret=secret,
        webhook_id=webhook_id,
        payload={
            "first_name": "Ada",
            **PERSON,
            "email": f"{webhook_id}@{EMAIL_DOMAIN}",
            "service_type": "dedicated_team",
            # Read by no mapping: the same context the web form's body carries, so the bodies weigh alike.
            "source_page": "https://example.com/services/dedicated-team",
            "utm": {"source": "google", "medium": "cpc", "campaign": "bench"},
        },
    )
    return sent.body, sent.headers


# --- the load generator --------------------------------------------------------------------------


def run_phase(server, source, *, round_no, endpoint, meter):
    tag = f"r{round_no}-{server.name}-{endpoint}"
    if endpoint == "intake":
        path, build = INTAKE_PATH, form_request
    else:
        path, build = webhook_path(source), lambda tag, n: webhook_request(source.secret, tag, n)
    last_job = Job.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
    http_json("POST", f"{FAKE_URL}/_stats/reset")
    meter.groups["daphne"] = server.pids
    counters_before = server_counters()
    sampler = Sampler(server.pids)
    sampler.start()
    records, t0, t1, window = asyncio.run(
        load([u + path for u in server.urls], build, concurrency=ARGS.concurrency, warmup=ARGS.warmup,
             duration=ARGS.duration, tag=tag, on_window_start=meter.sample, on_window_end=meter.sample)
    )  # fmt: skip
    samples = sampler.stop()
    counters_after = server_counters()
    upstream = http_json("GET", f"{FAKE_URL}/_stats")

    in_window = [r for r in records if t0 <= r[1] < t1]
    latencies = sorted((r[1] - r[0]) * 1000 for r in in_window if r[2] == 200)
    ok_total = sum(1 for r in records if r[2] == 200)
    error_kinds = {}
    for r in records:
        if r[2] != 200:
            error_kinds[r[3]] = error_kinds.get(r[3], 0) + 1

    # Per request of the whole phase; the sampler's own queries (one transaction each) and the two
    # counter connections are taken out.
    n = max(len(records), 1)
    delta = {k: counters_after[k] - counters_before[k] for k in counters_before}
    per_request = {
        "new_redis_connections": round((delta["redis_connections"] - 1) / n, 3),
        "redis_commands": round(delta["redis_commands"] / n, 2),
        "new_pg_sessions": round((delta["pg_sessions"] - 2) / n, 3),
        "pg_transactions": round((delta["pg_transactions"] - samples.pop("sampler_queries") - 2) / n, 2),
    }
    return {
        "round": round_no,
        "server": server.name,
        "endpoint": endpoint,
        "concurrency": ARGS.concurrency,
        "measured_seconds": round(t1 - t0, 3),
        "measured_ok": len(latencies),
        "rate": len(latencies) / (t1 - t0),
        "p50_ms": percentile(latencies, 0.50),
        "p90_ms": percentile(latencies, 0.90),
        "p99_ms": percentile(latencies, 0.99),
        "max_ms": latencies[-1] if latencies else None,
        "requests": len(records),
        "errors": sum(error_kinds.values()),
        "error_kinds": error_kinds,
        "upstream_calls": upstream["requests"],
        "upstream_max_inflight": upstream["max_inflight"],
        "cpu_us_per_request": meter.per_unit(window["start"], window["end"], len(in_window)),
        "samples": samples,
        "servers_per_request": per_request,
        "check": check_rows(tag, endpoint, source, ok=ok_total, requests=len(records),
                            last_job=last_job, upstream_calls=upstream["requests"]),
    }  # fmt: skip


def check_rows(tag, endpoint, source, *, ok, requests, last_job, upstream_calls):
    """The rows the phase left, against the 200s its clients counted."""

    leads = Lead.objects.filter(email__startswith=f"{tag}-")
    channel = Lead.Channel.WEB_FORM if endpoint == "intake" else "webhook"
    check = {
        "requests": requests,
        "ok": ok,
        "lead_rows": leads.count(),
        "lead_rows_of_channel": leads.filter(channel=channel).count(),
        "llm_classified_rows": leads.filter(classified_by=Lead.Classifier.LLM).count(),
        "job_rows_by_kind": dict(
            Job.objects.filter(pk__gt=last_job).values_list("kind").annotate(n=Count("pk")).order_by("kind")
        ),
        "upstream_calls": upstream_calls,
    }
    passed = (
        check["lead_rows"] == ok
        and check["lead_rows_of_channel"] == ok
        and check["llm_classified_rows"] == ok
        and set(check["job_rows_by_kind"]) >= LEAD_JOB_KINDS
        and all(n == ok for n in check["job_rows_by_kind"].values())
    )
    if endpoint == "webhook":
        logged = InboundRequest.objects.filter(source=source, platform_id__startswith=f"{tag}-")
        dedup = InboundLead.objects.filter(source=source, platform_id__startswith=f"{tag}-")
        check["request_log_rows"] = logged.count()
        check["request_log_created"] = logged.filter(outcome=InboundRequest.Outcome.CREATED, lead__isnull=False).count()
        check["dedup_rows"] = dedup.count()
        check["dedup_distinct_leads"] = dedup.values("lead").distinct().count()
        # Each webhook's lead is the one its own body described: the email carries the webhook-id.
        check["dedup_rows_naming_another_lead"] = dedup.exclude(
            lead__email=Concat(F("platform_id"), Value(f"@{EMAIL_DOMAIN}"))
        ).count()
        passed = passed and (
            check["request_log_rows"] == requests
            and check["request_log_created"] == ok
            and check["dedup_rows"] == ok
            and check["dedup_distinct_leads"] == ok
            and check["dedup_rows_naming_another_lead"] == 0
        )
    check["passed"] = passed
    return check


def print_phase(p):
    cpu, srv = p["cpu_us_per_request"], p["servers_per_request"]
    print(f"  r{p['round']} {p['server']:<7} {p['endpoint']:<7} c={p['concurrency']:<3} {p['rate']:7.1f} leads/s  "
          f"p50 {p['p50_ms'] or 0:7.1f} ms  p99 {p['p99_ms'] or 0:7.1f} ms  errors {p['errors']}  "
          f"rows {'ok' if p['check']['passed'] else 'MISMATCH'}  daphne {cpu['daphne']} us/req "
          f"({cpu['daphne_cores']} cores), postgres {cpu['postgres']} us/req, other tenants {cpu['other_cores']} "
          f"cores; per request: {srv['pg_transactions']} pg tx, {srv['redis_commands']} redis cmds",
          flush=True)  # fmt: skip


def webhook_path(source):
    return f"/api/sources/{source.public_id}/webhook"


def warm_up(base_urls, source):
    """Imports, URL resolution, the DB pool, the upstream connection: before anything is measured."""

    async def go():
        async with aiohttp.ClientSession() as session:
            for base in base_urls:
                for endpoint in ENDPOINTS:
                    for n in range(30):
                        tag = f"warm-{base.rsplit(':', 1)[1]}-{endpoint}"
                        if endpoint == "intake":
                            url, (body, headers) = base + INTAKE_PATH, form_request(tag, n)
                        else:
                            url, (body, headers) = base + webhook_path(source), webhook_request(source.secret, tag, n)
                        async with session.post(url, data=body, headers=headers) as r:
                            if r.status != 200:
                                raise BenchError(f"warm-up {url}: HTTP {r.status}: {(await r.text())[:500]}")

    asyncio.run(go())


def retry_check(server, source, count):
    """A platform's retry: `count` webhooks of the measured phases sent again (same webhook-id, signed anew)
    must each answer the lead the first one made, and make none."""
    import urllib.request

    sent = list(
        InboundLead.objects.filter(source=source, platform_id__regex=r"^r[0-9]+-")
        .order_by("?")
        .values_list("platform_id", "lead__public_id")[:count]
    )
    leads_before = Lead.objects.count()
    duplicates_before = InboundRequest.objects.filter(outcome=InboundRequest.Outcome.DUPLICATE).count()
    same_lead = 0
    for platform_id, lead_public_id in sent:
        tag, _, n = platform_id.rpartition("-")
        body, headers = webhook_request(source.secret, tag, int(n))
        request = urllib.request.Request(server.urls[0] + webhook_path(source), data=body, headers=headers)
        with urllib.request.urlopen(request, timeout=10) as response:
            same_lead += json.loads(response.read())["leads"] == [str(lead_public_id)]
    check = {
        "resent": len(sent),
        "answered_with_the_first_lead": same_lead,
        "new_leads": Lead.objects.count() - leads_before,
        "logged_as_duplicate": InboundRequest.objects.filter(outcome=InboundRequest.Outcome.DUPLICATE).count()
        - duplicates_before,
    }
    check["passed"] = (
        len(sent) == count and same_lead == count and check["new_leads"] == 0 and check["logged_as_duplicate"] == count
    )
    return check


def source_create():
    """The generic-JSON source the webhooks go to: its default mapping, confirmation emails on (so a lead sets
    off what a web-form lead does), no store."""
    return InboundSource.objects.create(
        name="Bench backend",
        kind=InboundSource.Kind.GENERIC,
        secret=standard_webhooks_secret(),
        send_confirmation=True,
    )


# --- in-process CPU breakdown ----------------------------------------------------------------------

LABELS = {
    "check_throttles": "throttle (one INCR + EXPIRE round trip to Redis)",
    "is_valid": "LeadInputSerializer validation",
    "lead_classify": "LLM call (HTTP round trip to the fake)",
    "save Lead INSERT": "INSERT of the lead",
    "insert_many_on_conflict": "INSERT of the lead's jobs (one statement)",
    "lead_fan_out": "lead_fan_out's own: building the jobs",
    "submit": "after commit: the run message published to Redis, here at commit",
    "lead_create": "lead_create's own: its transaction, building the row",
    "lead_receive_check": "lead_receive_check's own: the field check's renaming",
    "lead_receive_save": "lead_receive_save's own: building the row",
    "source_receiving": "SELECT of the source",
    "verify": "Standard Webhooks signature check",
    "loggable_body": "the body as the log keeps it",
    "_kept_headers": "the headers the log keeps",
    "save InboundRequest INSERT": "INSERT of the request-log row",
    "save InboundRequest UPDATE": "UPDATE of the request-log row (outcome, results, lead)",
    "submissions": "the body parsed (foundation.parsers) and read as a submission",
    "_known": "SELECT of the dedup row (a retry?)",
    "mapped_fields": "the mapping: JMESPath over the document",
    "_lead_fields": "_lead_fields' own: service type, steps, UTM",
    "save InboundLead INSERT": "INSERT of the dedup row",
    "_request_process": "_request_process's own: the leads checked before the transaction",
    "_request_write": "_request_write's own: its transaction, results, summary",
    "request_receive": "request_receive's own",
}


def profile(count, public_id):
    """CPU per request of each endpoint and of its parts, in this process, one request at a time.

    Django's test client runs the same middleware and views as daphne but no ASGI server, no threads and
    no concurrency, so the figures are the application's own cost. Parts are measured by wrapping the
    functions (process CPU time, each exclusive of the parts nested in it); what no part covers is "rest".
    The endpoints take turns every 10 requests. Then the same again under cProfile, for the functions.
    """
    import cProfile
    import pstats
    import warnings

    from django.db import connection as conn
    from django.db.models import Model
    from django.test import Client, override_settings
    from rest_framework import serializers
    from rest_framework.views import APIView

    import jobs.dispatch as job_dispatch
    import jobs.services as job_services
    import leadgen.intake as lead_intake
    import leadgen.services as lead_services
    from sources import platforms as source_platforms
    from sources import selectors as source_selectors
    from sources import services as source_services

    source = InboundSource.objects.get(public_id=public_id)
    spent = {endpoint: {} for endpoint in ENDPOINTS}
    current = {"spent": {}}  # the endpoint's being measured
    stack = []

    def timed(name, fn):
        def wrapper(*args, **kwargs):
            part = name(args, kwargs) if callable(name) else name
            started = time.process_time()
            stack.append(0.0)
            try:
                return fn(*args, **kwargs)
            finally:
                nested = stack.pop()
                total = time.process_time() - started
                current["spent"][part] = current["spent"].get(part, 0.0) + total - nested
                if stack:
                    stack[-1] += total

        return wrapper

    def save_name(args, kwargs):
        model = args[0]
        return f"save {type(model).__name__} {'INSERT' if model._state.adding else 'UPDATE'}"

    warnings.filterwarnings("ignore", message="No directory at", module="django.core.handlers.base")
    patches = [
        (Model, "save", save_name),
        (APIView, "check_throttles", "check_throttles"),
        (serializers.Serializer, "is_valid", "is_valid"),
        (lead_services, "lead_classify", "lead_classify"),
        (lead_services, "lead_create", "lead_create"),
        (lead_intake, "lead_receive_check", "lead_receive_check"),
        (lead_intake, "lead_receive_save", "lead_receive_save"),
        (lead_services, "lead_fan_out", "lead_fan_out"),
        (job_services, "insert_many_on_conflict", "insert_many_on_conflict"),
        (job_dispatch.run_messages, "submit", "submit"),
        (source_selectors, "source_receiving", "source_receiving"),
        (source_platforms, "verify", "verify"),
        (source_platforms, "loggable_body", "loggable_body"),
        (source_platforms, "submissions", "submissions"),
        (source_platforms, "mapped_fields", "mapped_fields"),
        (source_services, "_kept_headers", "_kept_headers"),
        (source_services, "_known", "_known"),
        (source_services, "_lead_fields", "_lead_fields"),
        (source_services, "_request_process", "_request_process"),
        (source_services, "_request_write", "_request_write"),
        (source_services, "request_receive", "request_receive"),
    ]
    client = Client(SERVER_NAME="localhost")

    def send(endpoint, tag, n):
        if endpoint == "intake":
            body, headers = form_request(tag, n)
            path = INTAKE_PATH
        else:
            body, headers = webhook_request(source.secret, tag, n)
            path = webhook_path(source)
        headers = {name: value for name, value in headers.items() if name != "Content-Type"}
        response = client.post(path, body, content_type="application/json", headers=headers)
        if response.status_code != 200:
            raise BenchError(f"profile {path}: HTTP {response.status_code}: {response.content[:300]!r}")

    # The run message goes out at commit, on this thread, so that its CPU is counted as its own:
    # under load a publisher thread sends it a few ms later (jobs/dispatch.py), batched with others.
    # Statements (BEGIN and COMMIT are not: psycopg sends them itself) as they run, on this thread.
    statements = []

    def count_statement(execute, sql, params, many, context):
        statements.append(sql[:110])
        return execute(sql, params, many, context)

    def interleaved(run):
        """`run(endpoint, numbers)` over `count` requests per endpoint, in chunks of 10 taking turns: both
        endpoints see the same machine, whose speed moves from second to second."""
        chunk = 10
        for i, first in enumerate(range(0, count, chunk)):
            for endpoint in ENDPOINTS if i % 2 == 0 else reversed(ENDPOINTS):
                run(endpoint, range(first, min(first + chunk, count)))

    cpu, wall, executed = (dict.fromkeys(ENDPOINTS, 0.0) for _ in range(3))

    def measured(endpoint, numbers):
        current["spent"] = spent[endpoint]
        statements.clear()
        wall_started, cpu_started = time.perf_counter(), time.process_time()
        for n in numbers:
            send(endpoint, f"prof-{endpoint}", n)
        cpu[endpoint] += time.process_time() - cpu_started
        wall[endpoint] += time.perf_counter() - wall_started
        executed[endpoint] += len(statements)

    profilers = {endpoint: cProfile.Profile() for endpoint in ENDPOINTS}

    def profiled(endpoint, numbers):
        profilers[endpoint].enable()
        for n in numbers:
            send(endpoint, f"prof-cprofile-{endpoint}", n)
        profilers[endpoint].disable()

    one = {}
    with override_settings(JOBS_DISPATCH_LINGER_MS=0), conn.execute_wrapper(count_statement):
        for endpoint in ENDPOINTS:
            for n in range(20):  # warm: imports, URLconf, the pool's connection, the upstream connection
                send(endpoint, f"prof-warm-{endpoint}", n)
            statements.clear()
            send(endpoint, f"prof-one-{endpoint}", 0)
            one[endpoint] = list(statements)
        originals = [(owner, attr, getattr(owner, attr)) for owner, attr, _ in patches]
        for owner, attr, name in patches:
            setattr(owner, attr, timed(name, getattr(owner, attr)))
        try:
            interleaved(measured)
        finally:
            for owner, attr, fn in originals:
                setattr(owner, attr, fn)
        # The same requests again under cProfile: the functions that cost the most, whoever calls them.
        interleaved(profiled)

    def listed(stats, key, n):
        rows = sorted(stats.stats.items(), key=key)[:n]
        return [{"function": f"{Path(file).name}:{line} {func}", "cumulative_us": round(ct / count * 1e6),
                 "own_us": round(tt / count * 1e6), "calls": round(nc / count, 2)}
                for (file, line, func), (_cc, nc, tt, ct, _callers) in rows]  # fmt: skip

    out = {}
    for endpoint in ENDPOINTS:
        parts = {k: round(v / count * 1e6) for k, v in spent[endpoint].items() if v}
        parts["rest (middleware, DRF, routing, rendering)"] = round(cpu[endpoint] / count * 1e6) - sum(parts.values())
        stats = pstats.Stats(profilers[endpoint])
        out[endpoint] = {
            "cpu_us": round(cpu[endpoint] / count * 1e6),
            "wall_us": round(wall[endpoint] / count * 1e6),
            "statements": round(executed[endpoint] / count, 2),
            "statements_of_one_request": one[endpoint],
            "parts_cpu_us": parts,
            # Under cProfile's own overhead: to compare the endpoints' functions, not as absolute costs.
            "cprofile_top_cumulative_us": listed(stats, lambda kv: -kv[1][3], 80),
            "cprofile_top_own_us": listed(stats, lambda kv: -kv[1][2], 40),
        }
    return out


def print_profile(prof):
    print(f"\nin-process CPU, one request at a time, daphne stopped ({ARGS.profile_count} requests each):")
    for endpoint, p in prof.items():
        print(
            f"  {endpoint:<7} CPU {p['cpu_us']:>6} us/req, wall {p['wall_us']:>6} us/req, "
            f"{p['statements']} SQL statements/req"
        )
        for name, us in sorted(p["parts_cpu_us"].items(), key=lambda kv: -kv[1]):
            print(f"      {us:>6} us  {LABELS.get(name, name)}")


def run_profile_subprocess(source):
    """The in-process profile in a fresh process: it wraps the project's functions to time them."""
    out = OUT_DIR / "profile.json"
    env = dict(os.environ, BENCH_FAKE_PORT=str(FAKE_PORT))
    command = [sys.executable, __file__, "--profile-only", "--profile-count", str(ARGS.profile_count),
               "--source", str(source.public_id), "--results", str(out)]  # fmt: skip
    if subprocess.run(command, cwd=ROOT, env=env).returncode != 0:
        print("the in-process profile failed (output above)", file=sys.stderr)
        return None
    return json.loads(out.read_text())


# --- main ------------------------------------------------------------------------------------------


def main():
    check_services()
    if ARGS.profile_only:
        ARGS.results.write_text(json.dumps(profile(ARGS.profile_count, ARGS.source), indent=2) + "\n")
        return 0
    print("migrating the fresh database ...", flush=True)
    t = time.monotonic()
    call_command("migrate", verbosity=0, interactive=False)
    print(f"  done in {time.monotonic() - t:.1f}s", flush=True)
    source = source_create()

    project_env = {**os.environ, **daphne_overrides(ARGS.daphne_env)}
    servers = [Server("project", ARGS.daphne_procs, project_env, out_dir=OUT_DIR)]
    if ARGS.variant_env or ARGS.variant_root:
        variant_env = {**os.environ, **daphne_overrides(ARGS.daphne_env), **daphne_overrides(ARGS.variant_env)}
        if ARGS.variant_root:
            variant_env["PYTHONPATH"] = str(ARGS.variant_root.resolve())
        servers.append(Server("variant", ARGS.daphne_procs, variant_env, out_dir=OUT_DIR, root=ARGS.variant_root))
    info = bench_info()
    if len(servers) > 1:
        info["variant"] = {"root": str(ARGS.variant_root or ROOT), "env": daphne_overrides(ARGS.variant_env)}
    print(f"machine: {info['nproc']} CPUs ({info['cpu']}), load average {info['loadavg_at_start'][0]:.1f}, "
          f"PostgreSQL {info['postgres'].split()[0]}; {info['server']}; DB pool per process "
          f"{info['database_pool_per_process']}; daphne env {info['daphne_env_overrides'] or 'as configured'}",
          flush=True)  # fmt: skip

    llm = [sys.executable, "-m", "standins.llm", "--port", str(FAKE_PORT), "--api-key", "bench-key"]
    fake = start_process("fake_llm", llm, env=dict(os.environ), out_dir=OUT_DIR)
    phases, failed_check, profile_result, retries = [], False, None, {}
    try:
        wait_http(fake, f"{FAKE_URL}/_stats", status=200)
        http_json("POST", f"{FAKE_URL}/_control", {"delay_ms": ARGS.upstream_ms})
        for server in servers:
            server.start()
            warm_up(server.urls, source)
            print(f"{server.name}: daphne pid(s) {server.pids} on port(s) {server.ports}", flush=True)
        # The daphne group is set per phase to the server being measured.
        meter = CpuMeter(own="loadgen", groups={"daphne": [], "fake_llm": [fake.pid]})
        print(f"fake LLM pid {fake.pid}; source "
              f"{source.public_id}; all up and warm; {ARGS.concurrency} clients, "
              f"classifier delay {ARGS.upstream_ms:g} ms, {ARGS.warmup:g}+{ARGS.duration:g} s per phase",
              flush=True)  # fmt: skip
        for round_no in range(1, ARGS.rounds + 1):
            order = [(server, endpoint) for server in servers for endpoint in ENDPOINTS]
            if round_no % 2 == 0:
                order.reverse()
            for server, endpoint in order:
                phase = run_phase(server, source, round_no=round_no, endpoint=endpoint, meter=meter)
                phases.append(phase)
                failed_check |= not phase["check"]["passed"]
                print_phase(phase)
                server.check_alive()
                time.sleep(1)  # let PostgreSQL's background writes settle
        for server in servers:
            if ARGS.retries:
                retries[server.name] = retry_check(server, source, ARGS.retries)
                print(f"{server.name}: retries {retries[server.name]}", flush=True)
                failed_check |= not retries[server.name]["passed"]
            server.stop()
        if ARGS.profile_count:
            http_json("POST", f"{FAKE_URL}/_control", {"delay_ms": 0})
            profile_result = run_profile_subprocess(source)
    finally:
        for server in servers:
            server.stop()
        stop_process(fake, timeout=10)
    info["loadavg_at_end"] = os.getloadavg()

    summary = {server.name: summarise([p for p in phases if p["server"] == server.name]) for server in servers}
    print_table(phases, summary)
    if profile_result:
        print_profile(profile_result)
    ARGS.results.parent.mkdir(parents=True, exist_ok=True)
    ARGS.results.write_text(json.dumps({
        "machine": info,
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(ARGS).items()},
        "phases": phases,
        "summary": summary,
        "retries": retries,
        "profile": profile_result,
    }, indent=2, default=str) + "\n")  # fmt: skip
    shown = ARGS.results.relative_to(ROOT) if ARGS.results.is_relative_to(ROOT) else ARGS.results
    print(f"\nwrote {shown}")
    failed_check |= not all(summ["job_kinds_alike"] for summ in summary.values())
    if failed_check:
        print("FAILED: rows do not match the 200s counted by the clients, or a retry made a lead (see check and "
              "retries in results)", file=sys.stderr)  # fmt: skip
        return 2
    # The target is the project's; a variant is information.
    return 0 if summary["project"]["met"] else 1


def summarise(phases):
    def median(endpoint, key):
        values = [p[key] for p in phases if p["endpoint"] == endpoint and p[key] is not None]
        return statistics.median(values) if values else None

    def rate(round_no, endpoint):
        return next(p["rate"] for p in phases if p["round"] == round_no and p["endpoint"] == endpoint)

    intake, webhook = median("intake", "rate"), median("webhook", "rate")
    ratio = webhook / intake if intake else 0.0
    errors = {endpoint: sum(p["errors"] for p in phases if p["endpoint"] == endpoint) for endpoint in ENDPOINTS}
    return {
        "intake_rate": intake,
        "webhook_rate": webhook,
        "intake_p50_ms": median("intake", "p50_ms"),
        "intake_p99_ms": median("intake", "p99_ms"),
        "webhook_p50_ms": median("webhook", "p50_ms"),
        "webhook_p99_ms": median("webhook", "p99_ms"),
        "intake_daphne_cpu_us": statistics.median(
            p["cpu_us_per_request"]["daphne"] for p in phases if p["endpoint"] == "intake"
        ),
        "webhook_daphne_cpu_us": statistics.median(
            p["cpu_us_per_request"]["daphne"] for p in phases if p["endpoint"] == "webhook"
        ),
        "ratio": ratio,
        "round_ratios": [rate(r, "webhook") / rate(r, "intake") for r in sorted({p["round"] for p in phases})],
        "errors": errors,
        "checks_passed": all(p["check"]["passed"] for p in phases),
        # A webhook's lead sets off what a web-form lead does.
        "job_kinds_alike": len({tuple(p["check"]["job_rows_by_kind"]) for p in phases}) == 1,
        "target": ARGS.target_ratio,
        "met": ratio >= ARGS.target_ratio and not any(errors.values()),
    }


def print_table(phases, summary):
    print()
    print(f"{'phase':<24}{'clients':>8}{'leads/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'errors':>8}{'rows':>6}"
          f"{'daphne us/req':>15}{'pg us/req':>11}{'daphne cores':>14}{'other cores':>13}{'pg busy':>9}")  # fmt: skip
    for p in phases:
        cpu = p["cpu_us_per_request"]
        name = f"r{p['round']} {p['server']} {p['endpoint']}"
        print(f"{name:<24}{p['concurrency']:>8}{p['rate']:>9.1f}"
              f"{p['p50_ms'] or 0:>9.1f}{p['p99_ms'] or 0:>9.1f}{p['errors']:>8}"
              f"{'ok' if p['check']['passed'] else 'BAD':>6}{cpu['daphne']:>15}{cpu['postgres']:>11}"
              f"{cpu['daphne_cores']:>14}{cpu['other_cores']:>13}{p['samples']['pg_busy_max']:>9}")  # fmt: skip
    print()
    for name, s in summary.items():
        print(f"{name}: webhooks {s['webhook_rate']:.1f} leads/s vs intake {s['intake_rate']:.1f} leads/s = "
              f"ratio {s['ratio']:.2f} (rounds: {', '.join(f'{r:.2f}' for r in s['round_ratios'])}); errors "
              f"{s['errors']}; target >= {s['target']}, zero errors: {'MET' if s['met'] else 'MISSED'}")  # fmt: skip


if __name__ == "__main__":
    run(main, "sources")
