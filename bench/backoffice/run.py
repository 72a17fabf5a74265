"""The back office's pages on a large database, against Django's stock changelists of the same models.

    scripts/with-services .venv/bin/python bench/backoffice/run.py [--loads 50] [--leads 100000] [--jobs 1000000]

See bench/backoffice/README.md for the method and the results. Server time per page is the time the
Django test client takes to answer a GET in this process (middleware, view, queries, template), with the
database on the same machine. Pages are loaded in turn, round after round, so a slower moment of the
shared machine hits every page alike. Exit status: 0 when the dashboard's p50 is under --target-ms
(default 300), served and cold (figures computed on every load), 1 when it is not, 2 when the bench
cannot run.
"""

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(ROOT))
os.chdir(ROOT)
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("LOG_LEVEL", "WARNING")  # a log line per request would measure the terminal

RESULTS = ROOT / "bench" / "backoffice" / "results.json"


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--loads", type=int, default=50, help="loads of each page (default 50)")
    parser.add_argument("--warmup", type=int, default=3, help="loads of each page before measuring (default 3)")
    parser.add_argument("--leads", type=int, default=100_000, help="leads, contacts, tasks and timeline events")
    parser.add_argument("--jobs", type=int, default=1_000_000, help="jobs (default 1000000)")
    parser.add_argument("--stores", type=int, default=20, help="stores (default 20)")
    parser.add_argument("--target-ms", type=float, default=300, help="dashboard p50 target (default 300)")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--profile", action="store_true", help="print each page's slowest queries once, then stop")
    return parser.parse_args()


ARGS = parse_args() if __name__ == "__main__" else None  # before Django is set up: --help needs no servers

import django  # noqa: E402

django.setup()

from django.contrib import admin  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client, override_settings  # noqa: E402

from bench.common import BenchError, check_services, machine_info, run  # noqa: E402
from crm.models import Contact, Task, TimelineEvent  # noqa: E402
from jobs.models import Job  # noqa: E402
from leadgen.models import Lead  # noqa: E402
from stores.models import Store  # noqa: E402

# --- data: generated in the database (generate_series), a few seconds per 100,000 rows -------------

# Over 90 days: leads arrive at all hours; 70 % by email (with a store), 30 % from the web form.
SEED_SQL = """
INSERT INTO tracking_store (franchise, name, account_id, store_uuid, lead_email, tracking_id, timezone,
                            quiet_hours_start, quiet_hours_end, is_active, created_at, updated_at, reassign_overdue)
SELECT 'Brand ' || (s %% 3), 'Store ' || s, 'acct-' || s, md5('store' || s)::uuid, 'store' || s || '@example.com',
       'ST' || s, 'America/New_York', '21:00', '08:00', true, now(), now(), false
FROM generate_series(1, %(stores)s) AS s;

INSERT INTO leadgen_lead (channel, first_name, last_name, email, phone, company, message, service_type, steps,
                          source_page, utm, store_id, status, category, reasoning, classified_by, pipedrive_state,
                          pipedrive_lead_id, pipedrive_cc_email, preview_url, created_at, updated_at, dedup_key,
                          lead_type, email_subject, email_from, email_recipient, tracking_id, franchise, account_id,
                          raw_body, is_forwarded, forwarded_original_from, forwarded_original_to,
                          forwarded_original_date, received_at, parse_state, parse_error, processed_by,
                          clickup_task_id, public_id, consent_text, consent_version, is_test)
SELECT CASE WHEN i %% 10 < 7 THEN 'email' ELSE 'web_form' END, 'First' || i, 'Last' || i, 'lead' || i || '@example.com',
       '+1415' || lpad(i::text, 7, '0'), '', '', '', '{}', '', '{}',
       CASE WHEN i %% 10 < 7 THEN (SELECT min(id) FROM tracking_store) + i %% %(stores)s END,
       CASE WHEN i %% 20 = 0 THEN 'spam' WHEN i %% 33 = 0 THEN 'vendor' ELSE 'lead' END, '', '', 'rules',
       CASE WHEN i %% 10 >= 7 AND i %% 3 = 0 THEN 'synced' WHEN i %% 10 >= 7 THEN 'pending' ELSE 'not_sent' END,
       '', '', '', now() - (i %% 129600) * interval '1 minute', now(),
       CASE WHEN i %% 10 < 7 THEN 'bench#' || i END, 'Web Lead', '', '', '', '', '', '', '', false, '', '', '',
       CASE WHEN i %% 10 < 7 THEN now() - (i %% 129600) * interval '1 minute' END,
       CASE WHEN i %% 10 < 7 THEN 'parsed' ELSE '' END, '', '', '', md5('lead' || i)::uuid, '', '', false
FROM generate_series(1, %(leads)s) AS i;

INSERT INTO crm_contact (phone, email, company, store_id, franchise, account_id, lifecycle_stage, lead_status,
                         first_name, last_name, last_activity_at, created_at, updated_at)
SELECT '+1650' || lpad(i::text, 7, '0'), '', '', (SELECT min(id) FROM tracking_store) + i %% %(stores)s, 'Brand',
       'acct', 'lead', 'new', 'First' || i, 'Last' || i, now() - (i %% 129600) * interval '1 minute', now(), now()
FROM generate_series(1, %(leads)s) AS i;

-- One task per contact: the email leads' outreach tasks (source lead set), the rest created by staff.
-- Answered in 1 to 14 minutes after the lead arrived; those of the last six hours still pending (some overdue).
INSERT INTO crm_task (id, contact_id, store_id, franchise, account_id, task_type, type_category, source_type,
                      source_lead_id, status, priority, action_needed, action_needed_reason, suggested_actions,
                      due_at, completed_at, completed_by, arrived_at, lead_recorded_at, created_at, updated_at)
SELECT md5('task' || t.n)::uuid, t.id, t.store_id, 'Brand', 'acct', 'lead_outreach', 'lead_outreach',
       CASE WHEN t.lead_id IS NULL THEN 'staff' ELSE 'lead' END, t.lead_id,
       CASE WHEN t.n %% 129600 < 360 THEN 'pending' ELSE 'done' END, 'high', true, 'New lead', '[]',
       t.arrived + interval '5 minutes',
       CASE WHEN t.n %% 129600 >= 360 THEN t.arrived + (1 + t.n %% 14) * interval '1 minute' END,
       'sales', t.arrived, t.recorded, t.arrived, now()
FROM (SELECT c.id, c.store_id, c.n, l.id AS lead_id, l.created_at AS recorded,
             coalesce(l.received_at, l.created_at, c.last_activity_at) AS arrived
      FROM (SELECT id, store_id, last_activity_at, row_number() OVER (ORDER BY id) AS n FROM crm_contact) AS c
      LEFT JOIN (SELECT id, created_at, received_at, row_number() OVER (ORDER BY id) AS n
                 FROM leadgen_lead WHERE channel = 'email') AS l ON l.n = c.n) AS t;

INSERT INTO crm_timelineevent (contact_id, store_id, franchise, account_id, event_type, event_category,
                               entity_type, entity_id, occurred_at, actor_type, new_value, idempotency_key,
                               created_at)
SELECT t.contact_id, t.store_id, 'Brand', 'acct', 'lead.created', 'lead', 'lead', coalesce(t.source_lead_id, 0)::text,
       t.created_at, 'lead_webhook', '{}', 'bench:' || t.id, now()
FROM crm_task AS t;

-- Prototypes: a third of the web-form leads (10 %% of all), created with their lead; 80 %% completed,
-- 10 %% failed, the rest still generating.
INSERT INTO prototypes_prototype (lead_id, state, chat_id, message_id, title, preview_url, continue_attempts,
                                  recovery_attempts, checks, events, started_at, generating_since, state_changed_at,
                                  finished_at, last_error, created_at)
SELECT id, CASE WHEN id / 3 %% 10 < 8 THEN 'completed' WHEN id / 3 %% 10 = 8 THEN 'failed' ELSE 'generating' END,
       'chat-' || id, 'msg-' || id, 'Prototype ' || id,
       CASE WHEN id / 3 %% 10 < 8 THEN 'https://preview.example.com/' || id ELSE '' END, 0, 0, 1, 3,
       created_at, created_at, created_at + interval '3 minutes',
       CASE WHEN id / 3 %% 10 < 9 THEN created_at + interval '3 minutes' END, '', created_at
FROM leadgen_lead WHERE channel = 'web_form' AND id %% 3 = 1;

-- Sales chats: one for every five leads over the same 90 days, six messages each; one in four produced a
-- web-form lead.
INSERT INTO chat_chatsession (session_id, client_ip, first_seen_at, last_seen_at, lead_id)
SELECT 'bench-' || j, '192.0.2.1', now() - (j * 5 %% 129600) * interval '1 minute',
       now() - (j * 5 %% 129600) * interval '1 minute' + interval '6 minutes',
       CASE WHEN j %% 4 = 0 THEN (SELECT min(id) FROM leadgen_lead) + (j * 10 + 7) %% %(leads)s END
FROM generate_series(1, %(leads)s / 5) AS j;

INSERT INTO chat_chatmessage (session_id, role, content, metadata, state, created_at)
SELECT s.id, CASE WHEN m %% 2 = 1 THEN 'user' ELSE 'assistant' END, 'Message ' || m, '{}', 'complete',
       s.first_seen_at + m * interval '1 minute'
FROM chat_chatsession AS s, generate_series(1, 6) AS m;

-- Jobs: nearly all finished; a few pending (some retrying), running and dead; mailbox polls every 5 minutes.
INSERT INTO jobs_job (kind, key, payload, status, attempts, max_attempts, run_after, last_error, created_at,
                      updated_at, finished_at)
SELECT (ARRAY['crm.lead_created', 'leadgen.pipedrive_sync', 'leadgen.confirmation_email',
              'tracking.deliver_profile', 'tracking.poll_mailbox'])[1 + i %% 5],
       CASE WHEN i %% 5 = 4 THEN 'tracking.poll_mailbox:sales:' || to_char(now() - i * interval '1 minute',
                                                                          'YYYYMMDD"T"HH24MISS')
            ELSE 'bench:' || i END,
       '{}',
       CASE WHEN i %% 1000 = 1 THEN 'pending' WHEN i %% 1000 = 2 THEN 'dead' WHEN i %% 5000 = 3 THEN 'running'
            ELSE 'succeeded' END,
       CASE WHEN i %% 2000 = 1 THEN 2 ELSE 1 END, 8, now() - i * interval '1 minute', '',
       now() - i * interval '1 minute', now(), now() - i * interval '1 minute'
FROM generate_series(1, %(jobs)s) AS i;
"""


def seed():
    if Lead.objects.exists():
        raise BenchError("the database already holds leads: run on a fresh one (scripts/with-services)")
    started = time.monotonic()
    with connection.cursor() as cursor:
        for statement in SEED_SQL.split(";\n\n"):
            cursor.execute(statement, {"stores": ARGS.stores, "leads": ARGS.leads, "jobs": ARGS.jobs})
        cursor.execute("VACUUM ANALYZE")  # the visibility map autovacuum keeps on a live database
    from tracking.models import Mailbox

    Mailbox.objects.create(name="sales", host="imap.example.com", username="leads", password_env_var="IMAP_PW")
    call_command("sync_schedules", verbosity=0)
    return round(time.monotonic() - started, 1)


# --- the stock changelists: a second admin site with plain ModelAdmins ---------------------------


class StockAdmin(admin.ModelAdmin):
    # The project's per-model templates link to views of its own admins, which the stock site lacks.
    change_list_template = "admin/change_list.html"


stock_site = admin.AdminSite(name="stock")
for model in (Job, Lead, Task, Contact):
    stock_site.register(model, StockAdmin)


def stock_urlconf():
    """The project's URLs plus the stock site under /stock-admin/ (a module object, as ROOT_URLCONF takes)."""
    import types

    from django.urls import path

    import config.urls

    module = types.ModuleType("bench_backoffice_urls")
    module.urlpatterns = [path("stock-admin/", stock_site.urls), *config.urls.urlpatterns]
    return module


# --- measuring ------------------------------------------------------------------------------------


def users():
    from django.contrib.auth.models import Group

    from foundation.staff_groups import OPERATIONS, SALES

    User = get_user_model()
    manager = User.objects.create_superuser("bench-manager", password="bench password for the manager")
    # Staff of one store (Sales and Operations groups): every page they open is scoped to it.
    store_staff = User.objects.create_user("bench-store", password="bench password for the store", is_staff=True)
    store_staff.groups.add(*Group.objects.filter(name__in=[SALES, OPERATIONS]))
    Store.objects.order_by("pk").first().staff.add(store_staff)
    return manager, store_staff


PAGES = [
    # (name, who, URL); "cold": figures computed on every load (DASHBOARD_CACHE_SECONDS=0)
    ("dashboard (30 days, every store)", "manager", "/admin/"),
    ("dashboard (30 days, one store's staff)", "store", "/admin/"),
    ("dashboard (90 days, every store)", "manager", "/admin/?days=90"),
    ("dashboard cold (30 days, every store)", "manager", "/admin/"),
    ("dashboard cold (30 days, one store's staff)", "store", "/admin/"),
    ("dashboard cold (90 days, every store)", "manager", "/admin/?days=90"),
    ("jobs list", "manager", "/admin/jobs/job/"),
    ("jobs list, stock", "manager", "/stock-admin/jobs/job/"),
    ("leads list", "manager", "/admin/leadgen/lead/"),
    ("leads list, stock", "manager", "/stock-admin/leadgen/lead/"),
    ("leads list, one store's staff", "store", "/admin/leadgen/lead/"),
    ("tasks list", "manager", "/admin/crm/task/"),
    ("tasks list, stock", "manager", "/stock-admin/crm/task/"),
    ("tasks list, one store's staff", "store", "/admin/crm/task/"),
    ("contacts list", "manager", "/admin/crm/contact/"),
    ("contacts list, stock", "manager", "/stock-admin/crm/contact/"),
    ("work queue, due soon, one store's staff", "store", "/admin/crm/task/queue/?view=due_soon"),
]


def profile(clients):
    """Each page once with every query timed: where a slow page spends its time."""
    for name, who, url in PAGES:
        timed = []

        def timer(execute, sql, params, many, context, timed=timed):
            started = time.perf_counter()
            try:
                return execute(sql, params, many, context)
            finally:
                timed.append(((time.perf_counter() - started) * 1000, sql))

        started = time.perf_counter()
        with connection.execute_wrapper(timer), override_settings(DASHBOARD_CACHE_SECONDS=0):
            clients[who].get(url)
        total = (time.perf_counter() - started) * 1000
        in_queries = sum(ms for ms, _ in timed)
        print(f"\n{name}: {total:.0f} ms, {len(timed)} queries, {in_queries:.0f} ms in them")
        for ms, sql in sorted(timed, reverse=True)[:4]:
            print(f"  {ms:7.1f} ms  {sql[:400]}")


# --- the two figures that dominated the cold dashboard, as they were read before and as they are now -----

# Before: the arrival and the recording time came from the lead, joined to every task of the period.
FIRST_RESPONSE_BEFORE = [
    """SELECT COUNT(*), COUNT(*) FILTER (WHERE status = 'done'),
              COUNT(*) FILTER (WHERE status = 'done' AND completed_at <= due_at)
       FROM crm_task WHERE task_type = 'lead_outreach' AND due_at >= %(start)s AND due_at < %(end)s""",
    """SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY EXTRACT(EPOCH FROM (t.completed_at
                  - COALESCE(l.received_at, l.created_at, t.created_at)))),
              percentile_cont(0.9) WITHIN GROUP (ORDER BY EXTRACT(EPOCH FROM (t.completed_at
                  - COALESCE(l.received_at, l.created_at, t.created_at))))
       FROM crm_task t LEFT JOIN leadgen_lead l ON t.source_lead_id = l.id
       WHERE t.task_type = 'lead_outreach' AND t.due_at >= %(start)s AND t.due_at < %(end)s
         AND t.completed_at IS NOT NULL AND t.status = 'done'""",
]
CONTACTED_BEFORE = [
    """SELECT COUNT(*) FROM crm_task t JOIN leadgen_lead l ON t.source_lead_id = l.id
       WHERE l.created_at >= %(start)s AND l.created_at < %(end)s AND t.status = 'done'""",
]


def figure_pairs():
    """(name, callable) of each figure read the old way and the way the dashboard reads it now, 30 days."""
    from backoffice import dashboard
    from crm import selectors as crm_selectors

    period = dashboard.Period.last_days(30)
    bounds = {"start": period.start, "end": period.end}

    def raw(statements):
        def run():
            with connection.cursor() as cursor:
                for sql in statements:
                    cursor.execute(sql, bounds)
                    cursor.fetchall()

        return run

    return [
        ("first response, before (join to the leads)", raw(FIRST_RESPONSE_BEFORE)),
        ("first response, now (the task's arrival)", lambda: crm_selectors.first_response(**bounds)),
        ("contacted, before (join to the leads)", raw(CONTACTED_BEFORE)),
        ("contacted, now (crm_task_done_lead_idx)", lambda: crm_selectors.leads_contacted_count(**bounds)),
    ]


def measure_figures():
    pairs = figure_pairs()
    times = {name: [] for name, _ in pairs}
    for round_number in range(ARGS.warmup + ARGS.loads):
        for name, read in pairs:
            started = time.perf_counter()
            read()
            if round_number >= ARGS.warmup:
                times[name].append((time.perf_counter() - started) * 1000)
    return times


def measure(clients):
    times = {name: [] for name, _, _ in PAGES}
    for round_number in range(ARGS.warmup + ARGS.loads):
        for name, who, url in PAGES:
            with override_settings(DASHBOARD_CACHE_SECONDS=0 if " cold " in name else 60):
                started = time.perf_counter()
                response = clients[who].get(url)
                elapsed = (time.perf_counter() - started) * 1000
            if response.status_code != 200:
                raise BenchError(f"{url} answered {response.status_code}")
            if round_number >= ARGS.warmup:
                times[name].append(elapsed)
    return times


def summary(values):
    ordered = sorted(values)
    return {
        "p50_ms": round(statistics.median(ordered), 1),
        "p99_ms": round(ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))], 1),
        "mean_ms": round(statistics.fmean(ordered), 1),
        "loads": len(ordered),
    }


def main():
    check_services()
    call_command("migrate", verbosity=0)
    seconds = seed()
    counts = {
        "stores": Store.objects.count(), "leads": Lead.objects.count(), "contacts": Contact.objects.count(),
        "tasks": Task.objects.count(), "timeline_events": TimelineEvent.objects.count(), "jobs": Job.objects.count(),
    }  # fmt: skip
    print(f"seeded in {seconds} s: {counts}", flush=True)
    manager, store_staff = users()
    with override_settings(ROOT_URLCONF=stock_urlconf(), ALLOWED_HOSTS=["*"], DEBUG=False):
        clients = {"manager": Client(), "store": Client()}
        clients["manager"].force_login(manager)
        clients["store"].force_login(store_staff)
        if ARGS.profile:
            clients["manager"].get("/admin/")  # warm the caches
            profile(clients)
            return 0
        load_before = os.getloadavg()
        times = measure(clients)
        figure_times = measure_figures()
        load_after = os.getloadavg()
    results = {name: summary(values) for name, values in times.items()}
    figure_results = {name: summary(values) for name, values in figure_times.items()}
    for name, figures in figure_results.items():
        print(f"{name:45s} p50 {figures['p50_ms']:8.1f} ms   p99 {figures['p99_ms']:8.1f} ms", flush=True)
    for name, figures in results.items():
        print(f"{name:45s} p50 {figures['p50_ms']:8.1f} ms   p99 {figures['p99_ms']:8.1f} ms", flush=True)
    dashboard_p50 = results["dashboard (30 days, every store)"]["p50_ms"]
    dashboards = [figures["p50_ms"] for name, figures in results.items() if name.startswith("dashboard (30 days")]
    cold = [figures["p50_ms"] for name, figures in results.items() if name.startswith("dashboard cold (30 days")]
    met = max(dashboards) < ARGS.target_ms
    ARGS.results.write_text(
        json.dumps(
            {
                "machine": machine_info(loadavg_before_measuring=load_before, loadavg_after_measuring=load_after),
                "data": counts,
                "seed_seconds": seconds,
                "loads": ARGS.loads,
                "warmup": ARGS.warmup,
                "pages": results,
                "figures_before_and_now": figure_results,
                "target": {
                    "dashboard_p50_ms_under": ARGS.target_ms, "met": met, "met_cold": max(cold) < ARGS.target_ms,
                },  # fmt: skip
            },
            indent=2,
        )
        + "\n"
    )
    print(f"dashboard p50 {dashboard_p50} ms: target {'met' if met else 'NOT met'} (< {ARGS.target_ms} ms)")
    print(f"cold dashboards (30 days) p50 {max(cold)} ms at most: {'met' if max(cold) < ARGS.target_ms else 'NOT met'}")
    print(f"load average {load_before} before measuring, {load_after} after")
    return 0 if met and max(cold) < ARGS.target_ms else 1


if __name__ == "__main__":
    run(main, "backoffice")
