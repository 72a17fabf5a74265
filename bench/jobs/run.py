"""Durable jobs vs bare Celery: 10,000 no-ops each, same worker, same run.

    scripts/with-services .venv/bin/python bench/jobs/run.py [--count 10000] [--rounds 2]

See bench/jobs/README.md for what is measured and the results. Exit status:
0 when the durable path reaches --target (default 1.0) of bare Celery's rate,
1 when it does not, 2 when a job was lost, failed or ran more than once.
"""

import argparse
import json
import os
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Run as a script, Python puts bench/jobs/ first on the path; the project root is what we want.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(ROOT))
os.chdir(ROOT)
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
# Per-job INFO lines (celery publish, job_finished) would measure the terminal, not the job layer.
os.environ.setdefault("LOG_LEVEL", "WARNING")

OUT_DIR = ROOT / "bench" / "jobs" / "out"  # git-ignored: worker log
RESULTS = ROOT / "bench" / "jobs" / "results.json"
STALL_SECONDS = 30  # give up waiting when no run completes for this long


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=10_000, help="no-ops per path per round (default 10000)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds; the order alternates (default 2)")
    parser.add_argument("--concurrency", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--target", type=float, default=1.0, help="minimum jobs/celery rate ratio (default 1.0)")
    parser.add_argument("--warmup", type=int, default=300, help="runs of each kind before measuring (default 300)")
    parser.add_argument("--profile-count", type=int, default=200, help="jobs for the in-process query count (0: skip)")
    parser.add_argument(
        "--include",
        action="append",
        default=[],
        metavar="MODULE",
        help="extra module imported first by this process and the worker (to try a patched job layer)",
    )
    parser.add_argument(
        "--results", type=Path, default=RESULTS, help=f"JSON output (default {RESULTS.relative_to(ROOT)})"
    )
    return parser.parse_args()


ARGS = parse_args() if __name__ == "__main__" else None  # before Django is set up: --help needs no servers

import django  # noqa: E402

django.setup()
for module in ARGS.include if ARGS else ():  # after setup, as in the worker
    __import__(module)

import redis  # noqa: E402
from celery.signals import before_task_publish  # noqa: E402
from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from django.db.models import Count, Max  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402

import jobs  # noqa: E402
from bench.common import (  # noqa: E402
    WORKER_ENV,
    BenchError,
    CpuMeter,
    celery_worker_command,
    check_alive,
    check_services,
    log_tail,
    machine_info,
    redis_client,
    run,
    start_process,
    stop_process,
)
from bench.jobs import handlers as bench  # noqa: E402
from jobs import dispatch, runtime  # noqa: E402
from jobs.kinds import RUN_MANY_TASK, RUN_TASK  # noqa: E402
from jobs.models import Job, JobAttempt  # noqa: E402

# --- PostgreSQL and Redis ---------------------------------------------------------------------


def redis_store():
    return redis_client()


def broker():
    return redis_client(settings.CELERY_BROKER_URL)


def bench_info():
    import celery
    import kombu

    return machine_info(
        celery=celery.__version__,
        kombu=kombu.__version__,
        redis_py=redis.__version__,
        worker=f"1 celery worker, prefork, concurrency {ARGS.concurrency}",
        prefetch_multiplier=settings.CELERY_WORKER_PREFETCH_MULTIPLIER,
        acks_late=settings.CELERY_TASK_ACKS_LATE,
        conn_max_age=settings.DATABASES["default"].get("CONN_MAX_AGE"),
        conn_health_checks=settings.DATABASES["default"].get("CONN_HEALTH_CHECKS"),
        db_pool=settings.DATABASES["default"].get("OPTIONS", {}).get("pool"),
        celery_db_reuse_max=getattr(settings, "CELERY_DB_REUSE_MAX", None),
    )


# --- the worker ----------------------------------------------------------------------------


def start_worker():
    command = celery_worker_command(
        concurrency=ARGS.concurrency, name="bench", include=[*ARGS.include, "bench.jobs.handlers"]
    )
    return start_process("worker", command, env={**os.environ, **WORKER_ENV}, out_dir=OUT_DIR)


# --- one phase -----------------------------------------------------------------------------


def reset(counter, count):
    store = redis_store()
    store.delete(counter, bench.end_key(counter))
    store.set(bench.TARGET, count)


def wait_idle(timeout=60):
    """Queue drained and nothing left unacknowledged: the next phase starts from a quiet worker."""
    b = broker()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if b.llen("celery") == 0 and b.hlen("unacked") == 0:
            return
        time.sleep(0.05)
    raise BenchError(f"broker not idle after {timeout}s: queue {b.llen('celery')}, unacked {b.hlen('unacked')}")


def wait_count(counter, count, worker):
    """Poll the Redis counter until it reaches `count`; stop when it stalls or the worker dies."""
    store = redis_store()
    last, last_change = -1, time.monotonic()
    next_report = time.monotonic() + 30
    while True:
        done = int(store.get(counter) or 0)
        if done >= count:
            return done
        if time.monotonic() >= next_report:
            print(f"  ... {done}/{count} run", flush=True)
            next_report += 30
        if done != last:
            last, last_change = done, time.monotonic()
        check_alive(worker)
        if time.monotonic() - last_change > STALL_SECONDS:
            return done
        time.sleep(0.01)


def truncate_jobs():
    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {JobAttempt._meta.db_table}, {Job._meta.db_table} RESTART IDENTITY CASCADE")


def pg_counters():
    """Server-side totals for the database: transactions and row operations on the job tables."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT xact_commit, xact_rollback, sessions FROM pg_stat_database WHERE datname = current_database()"
        )
        commits, rollbacks, sessions = cursor.fetchone()
        cursor.execute(
            "SELECT coalesce(sum(n_tup_ins), 0), coalesce(sum(n_tup_upd), 0), coalesce(sum(n_tup_hot_upd), 0)"
            " FROM pg_stat_user_tables WHERE relname = ANY(%s)",
            [[Job._meta.db_table, JobAttempt._meta.db_table]],
        )
        inserts, updates, hot_updates = cursor.fetchone()
    return {"connections": sessions, "commits": commits, "rollbacks": rollbacks,
            "inserts": int(inserts), "updates": int(updates), "hot_updates": int(hot_updates)}  # fmt: skip


def run_celery(count, worker, meter):
    wait_idle()
    reset(bench.CELERY_COUNTER, count)
    before_pg = pg_counters()
    task = bench.celery_noop
    cpu_before = meter.sample()
    start = time.time()
    for _ in range(count):
        task.delay()
    published = time.time()
    done = wait_count(bench.CELERY_COUNTER, count, worker)
    if done < count:
        raise BenchError(f"bare celery: only {done}/{count} tasks ran (stalled {STALL_SECONDS}s)")
    end = float(redis_store().get(bench.end_key(bench.CELERY_COUNTER)))
    cpu_after = meter.sample()
    after_pg = pg_counters()
    return {
        "path": "celery",
        "count": count,
        "enqueue_seconds": published - start,
        "total_seconds": end - start,
        "rate": count / (end - start),
        "cpu_us_per_op": meter.per_unit(cpu_before, cpu_after, count),
        "postgres_per_op": {k: round((after_pg[k] - before_pg[k]) / count, 2) for k in after_pg},
    }


class MessageCount:
    """Run messages this process published (Celery's before_task_publish), by task name."""

    def __init__(self):
        self.by_task = {}
        before_task_publish.connect(self.count, weak=False)

    def count(self, sender=None, **kwargs):
        self.by_task[sender] = self.by_task.get(sender, 0) + 1

    def run_messages(self):
        return self.by_task.get(RUN_TASK, 0) + self.by_task.get(RUN_MANY_TASK, 0)


MESSAGES = MessageCount()


def run_jobs(count, worker, meter, round_no):
    wait_idle()
    truncate_jobs()
    reset(bench.JOBS_COUNTER, count)
    prefix = f"bench:r{round_no}:"
    before = pg_counters()
    messages_before = MESSAGES.run_messages()
    enqueue = jobs.enqueue
    cpu_before = meter.sample()
    start = time.time()
    for n in range(count):
        with transaction.atomic():  # one request's transaction per job; the run message goes at commit
            enqueue(bench.JOB_KIND, {}, key=f"{prefix}{n}")
    published = time.time()
    done = wait_count(bench.JOBS_COUNTER, count, worker)
    handler_end = redis_store().get(bench.end_key(bench.JOBS_COUNTER))
    # The handler counts before the job row is marked finished: wait for the last finishing UPDATE.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if Job.objects.filter(status=Job.Status.RUNNING).count() == 0:
            break
        time.sleep(0.02)
    cpu_after = meter.sample()
    after = pg_counters()
    messages = MESSAGES.run_messages() - messages_before
    check = verify_jobs(prefix, count)
    check["handler_runs"] = done
    last_finish = Job.objects.aggregate(last=Max("finished_at"))["last"]
    end = max(float(handler_end) if handler_end else 0.0, last_finish.timestamp() if last_finish else 0.0)
    result = {
        "path": "jobs",
        "count": count,
        "enqueue_seconds": published - start,
        "total_seconds": end - start,
        "rate": count / (end - start) if end > start else 0.0,
        "check": check,
        "run_messages": messages,
        "jobs_per_message": round(count / messages, 2) if messages else None,
        "cpu_us_per_op": meter.per_unit(cpu_before, cpu_after, count),
        "postgres_per_op": {k: round((after[k] - before[k]) / count, 2) for k in after},
    }
    return result


def verify_jobs(prefix, count):
    """Every job succeeded, with exactly one attempt recorded; anything else is reported, not swept."""
    jobs_qs = Job.objects.filter(key__startswith=prefix)
    statuses = dict(jobs_qs.values_list("status").annotate(n=Count("id")).values_list("status", "n"))
    one_attempt = jobs_qs.filter(status=Job.Status.SUCCEEDED, attempts=1).count()
    attempt_rows = JobAttempt.objects.filter(job__key__startswith=prefix)
    attempts_by_outcome = dict(attempt_rows.values_list("outcome").annotate(n=Count("id")).values_list("outcome", "n"))
    pending = list(jobs_qs.filter(status=Job.Status.PENDING).values_list("pk", flat=True)[:20])
    ok = (
        jobs_qs.count() == count
        and one_attempt == count
        and attempts_by_outcome == {JobAttempt.Outcome.SUCCEEDED: count}
    )
    return {
        "ok": ok,
        "jobs": jobs_qs.count(),
        "statuses": statuses,
        "succeeded_with_one_attempt": one_attempt,
        "attempt_rows": attempts_by_outcome,
        "pending_sample": pending,
    }


# --- where the time goes: statements and microseconds per job, worker stopped ----------------


def profile(count, per_message):
    """Queries and microseconds per job on each side, measured in this process with the worker stopped.

    Wall time (`*_us`): enqueue exactly as run_jobs does it (its run messages
    are purged afterwards), and runtime.job_run wrapped in what Celery's
    Django fixup does around every task in a prefork worker (its
    close_database() before and after), so connection handling is counted as
    in the worker.

    CPU time of this thread (`cpu_us`, per job), step by step: bare Celery's
    `.delay()`; the business transaction with its enqueue (its run message
    handed over, not sent); the publish of one run message of `per_message`
    jobs (as many as a message carried in the rounds), divided among them; the
    handler both paths run; runtime.jobs_run on messages of `per_message` jobs,
    and in it the first job's claim (one per message) and the statement that
    finishes a job and claims the next.
    """
    from types import SimpleNamespace

    from celery.fixups.django import DjangoWorkerFixup
    from django.test.utils import override_settings

    from config.celery import app

    truncate_jobs()
    out, cpu = {"jobs_per_message": per_message}, {}
    size = max(round(per_message), 1)

    def fresh_jobs(label):
        now = datetime.now(UTC)
        made = Job.objects.bulk_create(
            Job(kind=bench.JOB_KIND, key=f"profile:{label}:{n}", payload={}, run_after=now, created_at=now)
            for n in range(count)
        )
        return [job.pk for job in made]

    start, cpu_start = time.perf_counter(), time.thread_time()
    for _ in range(count):
        bench.celery_noop.delay()
    out["celery_delay_us"] = (time.perf_counter() - start) / count * 1e6
    cpu["celery_delay"] = (time.thread_time() - cpu_start) / count * 1e6

    with CaptureQueriesContext(connection) as ctx:
        start = time.perf_counter()
        for n in range(count):
            with transaction.atomic():
                jobs.enqueue(bench.JOB_KIND, {}, key=f"profile:enqueue:{n}")
        elapsed = time.perf_counter() - start
    out["enqueue_us"] = elapsed / count * 1e6
    out["enqueue_queries"] = summarize(ctx.captured_queries, count)

    with override_settings(JOBS_DISPATCH_LINGER_MS=600_000):  # handed over, sent only by the flush below
        cpu_start = time.thread_time()
        for n in range(count):
            with transaction.atomic():
                jobs.enqueue(bench.JOB_KIND, {}, key=f"profile:transaction:{n}")
        cpu["enqueue_transaction"] = (time.thread_time() - cpu_start) / count * 1e6
        dispatch.run_messages.flush()
        ids = fresh_jobs("publish")
        cpu_start = time.thread_time()
        for first in range(0, count, size):
            dispatch.run_messages.submit(ids[first : first + size])
            dispatch.run_messages.flush()  # one run message, sent on this thread
        cpu["publish_share"] = (time.thread_time() - cpu_start) / count * 1e6

    cpu_start = time.thread_time()
    for _ in range(count):
        bench.count_run(bench.JOBS_COUNTER)
    cpu["handler"] = (time.thread_time() - cpu_start) / count * 1e6

    ids = fresh_jobs("claim")
    cpu_start = time.thread_time()
    for job_id in ids:
        runtime.job_claim(job_id=job_id)
    cpu["claim"] = (time.thread_time() - cpu_start) / count * 1e6

    ids = fresh_jobs("jobs_run")
    with CaptureQueriesContext(connection) as ctx:
        cpu_start = time.thread_time()
        for first in range(0, count, size):
            runtime.jobs_run(job_ids=ids[first : first + size])
        cpu["jobs_run"] = (time.thread_time() - cpu_start) / count * 1e6
    out["jobs_run_queries"] = summarize(ctx.captured_queries, count)
    cpu["finish_and_claim_next"] = cpu["jobs_run"] - cpu["handler"] - cpu["claim"] / size

    ids = fresh_jobs("job_run")
    fixup = DjangoWorkerFixup(app)
    fixup.worker = SimpleNamespace(pool_cls="prefork")
    sessions_before = pg_counters()["connections"]
    with CaptureQueriesContext(connection) as ctx:
        start = time.perf_counter()
        for job_id in ids:
            fixup.close_database()  # task_prerun
            runtime.job_run(job_id=job_id)
            fixup.close_database()  # task_postrun
        elapsed = time.perf_counter() - start
    out["job_run_us"] = elapsed / count * 1e6
    out["job_run_queries"] = summarize(ctx.captured_queries, count)
    out["job_run_connections"] = round((pg_counters()["connections"] - sessions_before) / count, 2)
    out["cpu_us"] = {step: round(us) for step, us in cpu.items()}
    broker().delete("celery")
    return out


def summarize(queries, count):
    """Statements per job grouped by their first words (BEGIN and COMMIT are not captured by Django)."""
    kinds = {}
    for query in queries:
        sql = query["sql"].lstrip()
        words = sql.split(None, 3)
        kind = words[0].upper()
        if kind == "UPDATE":
            kind = f"UPDATE {words[1].strip(chr(34))}"
        elif kind == "INSERT":
            kind = f"INSERT {words[2].strip(chr(34))}"
        elif kind == "SELECT":
            kind = (
                "SELECT 1 (health check)"
                if sql.upper().startswith("SELECT 1") and "FROM" not in sql.upper()
                else "SELECT"
            )
        kinds[kind] = kinds.get(kind, 0) + 1
    per_job = {k: round(v / count, 2) for k, v in sorted(kinds.items())}
    per_job["total"] = round(len(queries) / count, 2)
    return per_job


# --- report --------------------------------------------------------------------------------


def print_table(rounds, summary):
    print()
    print(f"{'round':>5}  {'path':<7} {'enqueue s':>10} {'total s':>9} {'rate /s':>9}  note")
    for r in rounds:
        for res in r["results"]:
            note = ""
            if res["path"] == "jobs":
                c = res["check"]
                note = (
                    "all succeeded, 1 attempt each" if c["ok"] else f"CHECK FAILED: {c['statuses']} {c['attempt_rows']}"
                )
            print(
                f"{r['round']:>5}  {res['path']:<7} {res['enqueue_seconds']:>10.2f} {res['total_seconds']:>9.2f}"
                f" {res['rate']:>9.0f}  {note}"
            )
        print(f"{'':>5}  ratio jobs/celery this round: {r['ratio']:.3f}   (order: {' then '.join(r['order'])})")
    print()
    print(f"median rate: celery {summary['celery_rate']:.0f}/s, jobs {summary['jobs_rate']:.0f}/s")
    verdict = "met" if summary["met"] else "NOT met"
    print(f"ratio jobs/celery: {summary['ratio']:.3f}  (target >= {ARGS.target}: {verdict})")
    print(
        f"CPU of our processes per op (median): celery {summary['celery_cpu_us_per_op']} us,"
        f" jobs {summary['jobs_cpu_us_per_op']} us; ratio {summary['cpu_ratio']:.3f}"
        " (what the rate ratio would be if our processes had the CPUs to themselves)"
    )


def by_path(rounds, path):
    return [res for r in rounds for res in r["results"] if res["path"] == path]


def summarize_rounds(rounds, failed):
    """Medians over rounds; the CPU ratio is the same comparison with other tenants' load taken out."""
    celery_rate = statistics.median(res["rate"] for res in by_path(rounds, "celery"))
    jobs_rate = statistics.median(res["rate"] for res in by_path(rounds, "jobs"))
    celery_cpu = statistics.median(res["cpu_us_per_op"]["total_ours"] for res in by_path(rounds, "celery"))
    jobs_cpu = statistics.median(res["cpu_us_per_op"]["total_ours"] for res in by_path(rounds, "jobs"))
    ratio = jobs_rate / celery_rate
    return {
        "celery_rate": celery_rate,
        "jobs_rate": jobs_rate,
        "ratio": ratio,
        "target": ARGS.target,
        "met": ratio >= ARGS.target,
        "celery_cpu_us_per_op": celery_cpu,
        "jobs_cpu_us_per_op": jobs_cpu,
        "cpu_ratio": celery_cpu / jobs_cpu if jobs_cpu else None,
        "all_jobs_ok": not failed,
    }


def main():
    started = time.monotonic()
    check_services()
    call_command("migrate", verbosity=0)
    info = bench_info()
    print(f"machine: {info['nproc']} CPU ({info['cpu']}), Python {info['python']}, PostgreSQL {info['postgres']},"
          f" Redis {info['redis']}; {info['worker']}")  # fmt: skip
    redis_store().delete(bench.CELERY_COUNTER, bench.JOBS_COUNTER)
    broker().delete("celery", "unacked", "unacked_index")

    worker = start_worker()
    rounds, profile_out, failed = [], None, False
    try:
        meter = CpuMeter(groups={"worker": [worker.pid]})
        # Ready when it has run a warm-up of both kinds (imports done, DB connections open in both children).
        t0 = time.monotonic()
        warm = max(ARGS.warmup, 1)
        reset(bench.CELERY_COUNTER, warm)
        for _ in range(warm):
            bench.celery_noop.delay()
        if wait_count(bench.CELERY_COUNTER, warm, worker) < warm:
            raise BenchError(f"worker not ready:\n{log_tail(worker)}")
        reset(bench.JOBS_COUNTER, warm)
        for n in range(warm):
            with transaction.atomic():
                jobs.enqueue(bench.JOB_KIND, {}, key=f"warmup:{n}")
        if wait_count(bench.JOBS_COUNTER, warm, worker) < warm:
            raise BenchError(f"worker not running jobs:\n{log_tail(worker)}")
        print(f"worker ready and warm in {time.monotonic() - t0:.1f}s")

        for round_no in range(1, ARGS.rounds + 1):
            order = ["celery", "jobs"] if round_no % 2 else ["jobs", "celery"]
            results = []
            for path in order:
                print(f"round {round_no}: {path} x {ARGS.count} ...", flush=True)
                if path == "celery":
                    results.append(run_celery(ARGS.count, worker, meter))
                else:
                    results.append(run_jobs(ARGS.count, worker, meter, round_no))
                    failed |= not results[-1]["check"]["ok"]
                time.sleep(1)  # let the worker's acks and PostgreSQL's background writes settle
            by_path = {r["path"]: r for r in results}
            rounds.append({
                "round": round_no,
                "order": order,
                "results": results,
                "ratio": by_path["jobs"]["rate"] / by_path["celery"]["rate"],
            })  # fmt: skip

    finally:
        stop_process(worker, timeout=20)  # warm shutdown: the queue is empty by now
    if ARGS.profile_count:
        print(f"profile: {ARGS.profile_count} jobs in this process, worker stopped ...", flush=True)
        per_message = statistics.median(
            res["jobs_per_message"] or 1 for r in rounds for res in r["results"] if res["path"] == "jobs"
        )
        profile_out = profile(ARGS.profile_count, per_message)

    summary = summarize_rounds(rounds, failed)
    summary["elapsed_seconds"] = round(time.monotonic() - started, 1)
    print_table(rounds, summary)
    if profile_out:
        print()
        print("in-process profile (per job, this process alone, worker stopped):")
        print(f"  celery .delay():          {profile_out['celery_delay_us']:7.0f} us")
        print(
            f"  atomic() + enqueue:       {profile_out['enqueue_us']:7.0f} us  queries {profile_out['enqueue_queries']}"
        )
        print(
            f"  job_run (worker side):    {profile_out['job_run_us']:7.0f} us  queries {profile_out['job_run_queries']}"
        )
        print(f"  new PostgreSQL connections per job_run with Celery's per-task handling: "
              f"{profile_out['job_run_connections']}")  # fmt: skip
        print(f"  CPU of this thread per job, messages of {profile_out['jobs_per_message']} jobs: "
              f"{profile_out['cpu_us']}; jobs_run queries {profile_out['jobs_run_queries']}")  # fmt: skip
    print()
    print("per op, measured during the phase (CPU in microseconds; other = the rest of the machine):")
    for r in rounds:
        for res in r["results"]:
            cpu = res["cpu_us_per_op"]
            print(f"  round {r['round']} {res['path']:<6} CPU bench {cpu['bench']:>5} worker {cpu['worker']:>5}"
                  f" postgres {cpu['postgres']:>5} redis {cpu['redis']:>4} = {cpu['total_ours']:>5};"
                  f" other {cpu['other_processes']:>5} steal {cpu['steal']:>4};"
                  f" machine busy {cpu['machine_utilisation']:.0%}")  # fmt: skip
            print(f"  {'':>8}        PostgreSQL: {res['postgres_per_op']}")
            if res["path"] == "jobs":
                print(f"  {'':>8}        run messages: {res['run_messages']} ({res['jobs_per_message']} jobs each)")

    ARGS.results.parent.mkdir(parents=True, exist_ok=True)
    ARGS.results.write_text(json.dumps({
        "machine": info,
        "args": {"count": ARGS.count, "rounds": ARGS.rounds, "concurrency": ARGS.concurrency,
                 "warmup": ARGS.warmup, "include": ARGS.include},
        "rounds": rounds,
        "summary": summary,
        "profile": profile_out,
    }, indent=2, default=str) + "\n")  # fmt: skip
    print(f"\nwrote {ARGS.results.relative_to(ROOT) if ARGS.results.is_relative_to(ROOT) else ARGS.results}")
    if failed:
        print(
            "FAILED: some jobs did not succeed exactly once (see check above); the sweep was not run", file=sys.stderr
        )
        return 2
    return 0 if summary["met"] else 1


if __name__ == "__main__":
    run(main, "jobs")
