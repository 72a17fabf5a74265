"""Email leads end to end against django-mailbox's IMAP importer: same dovecot, same emails, same run.

    scripts/with-services .venv/bin/python bench/imap/run.py [--count 5000] [--rounds 2]

`make bench-imap` installs requirements-bench.txt (django-mailbox) and runs it.
See bench/imap/README.md for what is measured and the results. Exit status: 0
when both targets are met, 1 when one is not, 2 when an email was lost or
processed wrongly.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from datetime import time as clock_time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Run as a script, Python puts bench/imap/ first on the path; the project root is what we want.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(ROOT))
os.chdir(ROOT)
os.environ["DJANGO_SETTINGS_MODULE"] = "bench.imap.settings"
# Per-message INFO lines would measure the terminal, not the ingestion.
os.environ.setdefault("LOG_LEVEL", "WARNING")

OUT_DIR = ROOT / "bench" / "imap" / "out"  # git-ignored: worker log
RESULTS = ROOT / "bench" / "imap" / "results.json"
STALL_SECONDS = 60  # give up waiting when nothing progresses for this long
AREA_CODES = ("212", "305", "312", "415", "512", "617", "646", "702", "206", "303")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=5000, help="emails per path per round (default 5000)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds; the order alternates (default 2)")
    parser.add_argument("--warmup", type=int, default=200, help="emails each path reads before measuring (default 200)")
    parser.add_argument("--concurrency", type=int, default=2, help="worker processes (default 2, as `make run`)")
    parser.add_argument("--target-rate", type=float, default=100.0, help="minimum end-to-end emails/s (default 100)")
    parser.add_argument("--target-ratio", type=float, default=2.5, help="minimum ours/baseline rate (default 2.5)")
    parser.add_argument("--results", type=Path, default=RESULTS, help="JSON output (default bench/imap/results.json)")
    return parser.parse_args()


ARGS = parse_args() if __name__ == "__main__" else None  # before Django is set up: --help needs no servers

import django  # noqa: E402

django.setup()

import imapclient  # noqa: E402
import phonenumbers  # noqa: E402
from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from django.db.models import Max  # noqa: E402
from django_mailbox.models import Mailbox as DjangoMailbox  # noqa: E402
from django_mailbox.models import Message as DjangoMailboxMessage  # noqa: E402

import jobs  # noqa: E402
from bench.common import (  # noqa: E402
    WORKER_ENV,
    BenchError,
    CpuMeter,
    celery_worker_command,
    check_services,
    log_tail,
    machine_info,
    run,
    start_process,
    stop_process,
)
from crm.intake import LEAD_CREATED  # noqa: E402
from crm.models import Contact, Task, TimelineEvent  # noqa: E402
from jobs.models import Job, JobAttempt  # noqa: E402
from leadgen.models import Lead  # noqa: E402
from standins.lead_emails import imap_session, lead_message  # noqa: E402
from standins.mailbox import Dovecot  # noqa: E402
from stores.models import Store  # noqa: E402
from tracking.models import ENV_MAILBOX_NAME  # noqa: E402
from tracking.services import POLL_KIND, lead_write_breaker  # noqa: E402

# --- setup ---------------------------------------------------------------------------------------


def bench_info():
    import django_mailbox

    dovecot = subprocess.run(["/usr/sbin/dovecot", "--version"], capture_output=True, text=True).stdout.strip()
    return machine_info(
        dovecot=dovecot,
        imapclient=imapclient.__version__,
        django_mailbox=getattr(django_mailbox, "__version__", "4.10.1"),
        worker=f"1 celery worker, prefork, concurrency {ARGS.concurrency}",
        fetch_batch=settings.IMAP_FETCH_BATCH,
    )


def phone_numbers(count):
    """`count` distinct valid US numbers, written the way notification emails write them."""
    numbers, n = [], 0
    while len(numbers) < count:
        area, exchange, line = AREA_CODES[n % 10], 200 + (n // 10) % 800, (n // 8000) % 10000
        n += 1
        if phonenumbers.is_valid_number(phonenumbers.parse(f"+1{area}{exchange}{line:04d}")):
            numbers.append(f"({area}) {exchange}-{line:04d}")
    return numbers


def messages(count):
    return [
        lead_message(first=f"Lead{n}", last="Bench", phone=phone, email=f"lead{n}@example.com", tracking_id="BENCH1")
        for n, phone in enumerate(phone_numbers(count))
    ]


def reset_data():
    """Each phase starts from empty tables, so every email is a new lead on both paths."""
    tables = [model._meta.db_table for model in (TimelineEvent, Task, Contact, Lead, JobAttempt, Job)]
    tables.append(DjangoMailboxMessage._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {', '.join(tables)} RESTART IDENTITY CASCADE")
    lead_write_breaker().close()


def start_worker(server, username, password):
    env = {
        **os.environ,
        **WORKER_ENV,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "IMAP_HOST": server.host, "IMAP_PORT": str(server.imaps_port), "IMAP_USER": username,
        "IMAP_PASSWORD": password, "IMAP_CA_FILE": str(server.ca_file),
        # One poll reads the whole mailbox, however long that takes on a busy machine.
        "IMAP_POLL_TIME_BUDGET_SECONDS": "3600", "JOBS_LEASE_SECONDS": "3900",
    }  # fmt: skip
    command = celery_worker_command(concurrency=ARGS.concurrency, name="bench-imap")
    process = start_process("worker", command, env=env, out_dir=OUT_DIR)
    ping = jobs.send_test(actor="bench")
    wait_for(
        lambda: Job.objects.get(pk=ping.pk).status, process, what="the worker to start", done=lambda s: s == "succeeded"
    )
    return process


def wait_for(progress, worker, *, what, done):
    """Until `done(progress())`; fails when progress stalls for STALL_SECONDS or the worker dies.

    Checked every 0.25 s with one cheap query, so the waiting costs the machine little.
    """
    last, last_change = None, time.monotonic()
    while not done(current := progress()):
        if worker.poll() is not None:
            raise BenchError(f"worker exited with {worker.returncode} waiting for {what}:\n{log_tail(worker, 40)}")
        if current != last:
            last, last_change = current, time.monotonic()
        if time.monotonic() - last_change > STALL_SECONDS:
            raise BenchError(f"stalled for {STALL_SECONDS}s waiting for {what} (at {current})")
        time.sleep(0.25)


def pg_counters():
    """Server-side totals of this database: connections opened, commits, rows written."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT sessions, xact_commit, xact_rollback, tup_inserted + tup_updated"
            " FROM pg_stat_database WHERE datname = current_database()"
        )
        sessions, commits, rollbacks, writes = cursor.fetchone()
    return {"connections": sessions, "commits": commits, "rollbacks": rollbacks, "rows_written": writes}


def per_email(before, after, count):
    return {key: round((after[key] - before[key]) / count, 2) for key in after}


# --- the two paths -------------------------------------------------------------------------------


def unseen_left(server, username, password):
    with imap_session(server, username, password) as client:
        return len(client.search(["UNSEEN"]))


def run_ours(server, account, count, worker, meter, label):
    """Poll (a job in the worker) → leads → LeadCreated jobs → contacts, tasks, timeline, all in the worker."""
    reset_data()
    server.deliver(account[0], messages(count))
    before, pg_before = meter.sample(), pg_counters()
    start = time.time()
    with transaction.atomic():
        poll = jobs.enqueue(POLL_KIND, {"mailbox": ENV_MAILBOX_NAME}, key=f"bench:{label}:{uuid.uuid4()}")
    wait_for(TimelineEvent.objects.count, worker, what=f"{count} timeline events", done=lambda events: events >= count)
    wait_for(Job.objects.filter(status=Job.Status.RUNNING).count, worker, what="jobs to finish", done=lambda n: n == 0)
    after, pg_after = meter.sample(), pg_counters()
    end = TimelineEvent.objects.aggregate(last=Max("created_at"))["last"].timestamp()
    poll.refresh_from_db()
    lead_created = Job.objects.filter(kind=LEAD_CREATED)
    check = {
        "leads": Lead.objects.filter(parse_state="parsed", store__isnull=False).count(),
        "contacts": Contact.objects.count(),
        "pending_tasks": Task.objects.filter(status="pending").count(),
        "timeline_events": TimelineEvent.objects.count(),
        "lead_created_succeeded_first_time": lead_created.filter(status="succeeded", attempts=1).count(),
        "jobs_not_succeeded": Job.objects.exclude(status=Job.Status.SUCCEEDED).count(),
        "unseen_left": unseen_left(server, *account),
    }
    counted = ("leads", "contacts", "pending_tasks", "timeline_events", "lead_created_succeeded_first_time")
    check["ok"] = all(check[k] == count for k in counted) and check["jobs_not_succeeded"] == check["unseen_left"] == 0
    total = end - start
    return {
        "path": "ours",
        "count": count,
        "total_seconds": round(total, 3),
        "rate": round(count / total, 1),
        "poll_seconds": round((poll.finished_at - poll.started_at).total_seconds(), 3),
        "poll_rate": round(count / (poll.finished_at - poll.started_at).total_seconds(), 1),
        "check": check,
        "cpu_us_per_email": meter.per_unit(before, after, count),
        "postgres_per_email": per_email(pg_before, pg_after, count),
    }


def run_django_mailbox(server, count, meter):
    """django-mailbox's importer: fetch each message over IMAP, store it as a Message row, delete it upstream."""
    reset_data()
    username, password = server.add_user()
    server.deliver(username, messages(count))
    mailbox = DjangoMailbox.objects.create(
        name=f"bench-{username}", uri=f"imap+ssl://{username}:{password}@{server.host}:{server.imaps_port}"
    )
    before, pg_before = meter.sample(), pg_counters()
    start = time.time()
    imported = sum(1 for _ in mailbox.get_new_mail())
    total = time.time() - start
    after, pg_after = meter.sample(), pg_counters()
    with imap_session(server, username, password) as client:
        left = len(client.search(["ALL"]))
    check = {"imported": imported, "messages": DjangoMailboxMessage.objects.count(), "left_in_mailbox": left}
    check["ok"] = imported == count and check["messages"] == count and left == 0
    return {
        "path": "django-mailbox",
        "count": count,
        "total_seconds": round(total, 3),
        "rate": round(count / total, 1),
        "check": check,
        "cpu_us_per_email": meter.per_unit(before, after, count),
        "postgres_per_email": per_email(pg_before, pg_after, count),
    }


def main():
    check_services()
    call_command("migrate", verbosity=0)
    info = bench_info()
    Store.objects.update_or_create(
        tracking_id="BENCH1",
        defaults={"franchise": "Bench Fitness", "name": "Bench", "account_id": "acct-bench",
                  "timezone": "America/New_York", "quiet_hours_start": clock_time(0), "quiet_hours_end": clock_time(0)},
    )  # fmt: skip
    results = {"machine": info, "args": vars(ARGS) | {"results": str(ARGS.results)}, "rounds": []}
    with Dovecot() as server:
        account = server.add_user()
        worker = start_worker(server, *account)
        try:
            meter = CpuMeter(groups={"worker": [worker.pid], "dovecot": [server.pid]})
            if ARGS.warmup:
                run_django_mailbox(server, ARGS.warmup, meter)
                run_ours(server, account, ARGS.warmup, worker, meter, "warmup")
            for round_no in range(1, ARGS.rounds + 1):
                order = ("django-mailbox", "ours") if round_no % 2 else ("ours", "django-mailbox")
                phases = []
                for path in order:
                    if path == "ours":
                        phase = run_ours(server, account, ARGS.count, worker, meter, f"r{round_no}")
                    else:
                        phase = run_django_mailbox(server, ARGS.count, meter)
                    print(f"round {round_no} {path}: {phase['rate']} emails/s ({phase['total_seconds']} s)", flush=True)
                    phases.append(phase)
                results["rounds"].append(phases)
        finally:
            stop_process(worker, timeout=20)

    phases = [phase for phases in results["rounds"] for phase in phases]
    rates = {path: [p["rate"] for p in phases if p["path"] == path] for path in ("ours", "django-mailbox")}
    ours, baseline = statistics.median(rates["ours"]), statistics.median(rates["django-mailbox"])
    results["summary"] = {
        "ours_median_rate": ours,
        "django_mailbox_median_rate": baseline,
        "ratio": round(ours / baseline, 2),
        "target_rate": ARGS.target_rate,
        "target_ratio": ARGS.target_ratio,
        "all_checks_ok": all(p["check"]["ok"] for p in phases),
    }
    ARGS.results.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results["summary"], indent=2))
    if not results["summary"]["all_checks_ok"]:
        return 2
    return 0 if ours >= ARGS.target_rate and ours / baseline >= ARGS.target_ratio else 1


if __name__ == "__main__":
    run(main, "imap")
