"""The daily CRM sync: 10,000 pending users among 1,000,000 vs among 10,000, fake CRM answering in 50 ms.

    scripts/with-services .venv/bin/python bench/tracking/sync/run.py [--pending 10000] [--total 1000000]

See bench/tracking/README.md for what is measured and the results. Exit status:
0 when both targets are met, 1 when one is missed, 2 when a profile was lost
or a delivery failed.
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
# Run as a script, Python puts this folder first on the path; the project root is what we want.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(ROOT))
os.chdir(ROOT)
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("LOG_LEVEL", "WARNING")  # a log line per delivery would measure the terminal

OUT_DIR = ROOT / "bench" / "tracking" / "sync" / "out"  # git-ignored: process logs
RESULTS = ROOT / "bench" / "tracking" / "sync" / "results.json"


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pending", type=int, default=10_000, help="pending users (default 10000)")
    parser.add_argument("--total", type=int, default=1_000_000, help="tracked users of the large set (default 1M)")
    parser.add_argument("--delay-ms", type=float, default=50, help="fake CRM answer time (default 50)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds; the order alternates (default 2)")
    parser.add_argument("--results", type=Path, default=RESULTS)
    return parser.parse_args()


ARGS = parse_args() if __name__ == "__main__" else None  # before Django is set up: --help needs no servers
PORT = 18000 + os.getpid() % 1000

import django  # noqa: E402

os.environ["CRM_WEBHOOK_URL"] = f"http://127.0.0.1:{PORT}/profiles"
os.environ["CRM_SIGNING_SECRET"] = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
os.environ.setdefault("KAPA_API_KEY", "")  # Kapa is not part of this measure: the CRM is
django.setup()

import requests  # noqa: E402
from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402

from bench.common import (  # noqa: E402
    WORKER_ENV,
    BenchError,
    CpuMeter,
    celery_worker_command,
    check_alive,
    check_services,
    machine_info,
    run,
    start_process,
    stop_process,
)
from docs_users.models import TrackedUser  # noqa: E402
from docs_users.sync import DELIVER_KIND, SYNC_KIND, profile_sync_start  # noqa: E402
from jobs.models import Job, JobAttempt  # noqa: E402

USERS = TrackedUser._meta.db_table


def seed(total: int, pending: int):
    """`total` users with a typical capture each, `pending` of them pending, spread over the table.

    n × 7919 mod total is a permutation of the users (7919 is a prime that divides no total used
    here), so taking those below `pending` picks them spread evenly and without a pattern in
    their ids, as activity would: an every-k-th pattern would put them all in one sync shard.
    """
    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {USERS}, {JobAttempt._meta.db_table}, {Job._meta.db_table} RESTART IDENTITY CASCADE")
        cursor.execute(
            f"""
            INSERT INTO {USERS} (
                sub, email, given_name, family_name, company, signed_up_at, last_sign_in_at, last_channel,
                mcp_client, last_activity_at, pending_since, mcp_tool_counts, mcp_last_tool_at, mcp_agent_intents,
                docs_recent_pages, docs_page_counts, docs_product_areas, docs_getting_started_visits,
                docs_search_terms, docs_last_active_at, kapa_questions, kapa_competitor_mentions,
                kapa_asked_thread_count, kapa_asked_questions, created_at, updated_at
            )
            SELECT
                'auth0|bench' || n, 'user' || n || '@acme' || (n %% 5000) || '.com', 'Given', 'Family',
                'Acme' || (n %% 5000), now() - interval '40 days', now() - interval '1 day', 'mcp',
                'Claude Code', now() - (n %% 20) * interval '1 day',
                CASE WHEN (n::bigint * 7919) %% %s < %s
                     THEN now() - interval '1 hour' + n * interval '1 microsecond' END,
                '{{"search_docs": 4, "ask_kapa": 1}}', now() - interval '1 day',
                '[{{"tool": "search_docs", "context": "compare tiered storage costs for user ada@acme.com",
                    "at": "2026-11-30T10:00:00+00:00"}}]',
                '["/current/get-started/", "/current/manage/tiered-storage/"]',
                '{{"/current/get-started/": 3, "/current/manage/tiered-storage/": 2}}',
                '{{"redpanda": 5}}', 3, '["tiered storage pricing"]', now() - interval '1 day',
                '["How do I size a cluster?"]', '{{}}', 0, '[]', now() - interval '40 days', now()
            FROM generate_series(1, %s) AS n
            """,
            [total, pending, total],
        )
        cursor.execute(f"VACUUM ANALYZE {USERS}")
        cursor.execute(f"SELECT count(*) FROM {USERS} WHERE pending_since IS NOT NULL")
        return cursor.fetchone()[0]


def crm(path, method="get"):
    return getattr(requests, method)(f"http://127.0.0.1:{PORT}{path}", timeout=5).json()


def wait_for(check, *, timeout, processes):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        for process in processes:
            check_alive(process)
        time.sleep(0.05)
    return False


def run_one(label, total, worker, fake, meter):
    print(f"{label}: seeding {total:,} users, {ARGS.pending:,} pending", flush=True)
    pending = seed(total, ARGS.pending)
    crm("/_stats/reset", "post")
    before = meter.sample()
    start = time.monotonic()
    profile_sync_start(reason="bench")  # what the beat trigger does; the worker runs it

    def finished():
        open_syncs = Job.objects.filter(kind=SYNC_KIND).exclude(status__in=["succeeded", "dead"]).exists()
        return not open_syncs and Job.objects.filter(kind=SYNC_KIND).exists()

    if not wait_for(finished, timeout=900, processes=[worker, fake]):
        raise BenchError(f"{label}: the sync did not finish within 900 s")
    seconds = time.monotonic() - start
    after = meter.sample()
    stats = crm("/_stats")
    deliveries = {
        status: Job.objects.filter(kind=DELIVER_KIND, status=status).count()
        for status in ("succeeded", "pending", "running", "dead", "skipped")
    }
    still_pending = TrackedUser.objects.filter(pending_since__isnull=False).count()
    ideal = ARGS.pending * ARGS.delay_ms / 1000 / settings.TRACKING_SYNC_CONCURRENCY
    result = {
        "label": label,
        "total_users": total,
        "pending_users": pending,
        "seconds": round(seconds, 2),
        "ideal_seconds": round(ideal, 2),
        "vs_ideal": round(seconds / ideal, 3),
        "users_per_second": round(pending / seconds, 1),
        "crm_requests": stats["requests"],
        "crm_distinct_webhook_ids": stats["distinct_ids"],
        "crm_max_inflight": stats["max_inflight"],
        "deliveries": deliveries,
        "still_pending": still_pending,
        "sync_jobs": Job.objects.filter(kind=SYNC_KIND).count(),
        "cpu_us_per_user": meter.per_unit(before, after, pending),
    }
    print(
        f"{label}: {seconds:.1f} s ({result['vs_ideal']}× ideal {ideal:.1f} s), "
        f"{stats['distinct_ids']:,} profiles, max in flight {stats['max_inflight']}",
        flush=True,
    )
    return result


def main():
    check_services()
    call_command("migrate", verbosity=0)
    receiver = [sys.executable, "-m", "standins.crm_receiver", "--port", str(PORT), "--delay-ms", str(ARGS.delay_ms),
                "--signing-secret", os.environ["CRM_SIGNING_SECRET"]]  # fmt: skip
    fake = start_process("fake_crm", receiver, env=dict(os.environ), out_dir=OUT_DIR)
    worker = start_process(
        "worker",
        celery_worker_command(concurrency=settings.TRACKING_SYNC_SHARDS, name="sync"),
        env={**os.environ, **WORKER_ENV},
        out_dir=OUT_DIR,
    )
    try:
        wait_for(lambda: _answers(), timeout=20, processes=[fake])
        meter = CpuMeter(groups={"worker": [worker.pid], "fake_crm": [fake.pid]})
        info = machine_info(
            sync_concurrency=settings.TRACKING_SYNC_CONCURRENCY,
            sync_batch=settings.TRACKING_SYNC_BATCH,
            crm_delay_ms=ARGS.delay_ms,
            sync_shards=settings.TRACKING_SYNC_SHARDS,
            worker=f"1 celery worker, prefork, concurrency {settings.TRACKING_SYNC_SHARDS} (one per sync shard)",
        )
        sets = [("large", ARGS.total), ("small", ARGS.pending)]
        rounds = []
        for round_no in range(ARGS.rounds):
            order = sets if round_no % 2 == 0 else sets[::-1]
            rounds.append({label: run_one(label, total, worker, fake, meter) for label, total in order})
    finally:
        stop_process(worker)
        stop_process(fake)

    summary = summarize(rounds)
    ARGS.results.write_text(json.dumps({"machine": info, "rounds": rounds, "summary": summary}, indent=2) + "\n")
    print(json.dumps(summary, indent=2))
    if not summary["nothing_lost"]:
        sys.exit(2)
    sys.exit(0 if summary["targets_met"] else 1)


def _answers():
    try:
        crm("/_stats")
        return True
    except requests.RequestException:
        return False


def summarize(rounds):
    large = [r["large"] for r in rounds]
    small = [r["small"] for r in rounds]
    worst_vs_ideal = max(r["vs_ideal"] for r in large + small)
    ratios = [lg["seconds"] / sm["seconds"] for lg, sm in zip(large, small, strict=True)]
    nothing_lost = all(
        r["crm_distinct_webhook_ids"] == r["pending_users"] and r["still_pending"] == 0
        and r["deliveries"]["succeeded"] == r["pending_users"]
        for r in large + small
    )  # fmt: skip
    return {
        "large_seconds": [r["seconds"] for r in large],
        "small_seconds": [r["seconds"] for r in small],
        "ideal_seconds": large[0]["ideal_seconds"],
        "worst_vs_ideal": worst_vs_ideal,
        "large_over_small": [round(x, 3) for x in ratios],
        "nothing_lost": nothing_lost,
        "targets_met": nothing_lost and worst_vs_ideal <= 1.3 and all(0.8 <= x <= 1.2 for x in ratios),
    }


if __name__ == "__main__":
    run(main, "tracking/sync")
