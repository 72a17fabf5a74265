"""Data-subject export and erasure of one person among many, on PostgreSQL.

    scripts/with-services .venv/bin/python bench/privacy/run.py [--rounds 5] [--events 10000] [--jobs 1000]

See bench/privacy/README.md for the method and the results. Each round seeds the person afresh (leads,
a contact with --events timeline events, --jobs jobs naming their leads, chats, a prototype, a docs user, a
parked email lead, a webhook's logged request, an admin history entry), then times the export (finding
every row and writing the JSON document) and the erasure (finding, deleting or anonymizing, the audit row,
the commit), and checks that nothing of the person is left. Beside them, the floor: the ORM's own cascade
from the person's contact and leads, which alone would leave their jobs, chats, docs user and request log
behind. Exit status: 0 when the slowest export and erasure are under --target-s (default 2), 1 when not,
2 when the bench cannot run.
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
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(ROOT))
os.chdir(ROOT)
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("LOG_LEVEL", "WARNING")

RESULTS = ROOT / "bench" / "privacy" / "results.json"


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help="rounds, each with a freshly seeded person")
    parser.add_argument("--events", type=int, default=10_000, help="the person's timeline events")
    parser.add_argument("--jobs", type=int, default=1_000, help="the person's jobs")
    parser.add_argument("--others", type=int, default=100_000, help="other people's leads, contacts, events")
    parser.add_argument("--other-jobs", type=int, default=1_000_000, help="other people's jobs")
    parser.add_argument("--target-s", type=float, default=2.0, help="export and erasure target (default 2 s)")
    parser.add_argument("--results", type=Path, default=RESULTS)
    return parser.parse_args()


ARGS = parse_args() if __name__ == "__main__" else None  # before Django is set up: --help needs no servers

import django  # noqa: E402

django.setup()

from django.contrib.admin.models import CHANGE, LogEntry  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.core.serializers.json import DjangoJSONEncoder  # noqa: E402
from django.db import connection, transaction  # noqa: E402

from bench.common import BenchError, CpuMeter, check_services, machine_info, proc_stat, run  # noqa: E402
from chat.models import ChatMessage, ChatSession  # noqa: E402
from crm.models import Contact, Task, TimelineEvent  # noqa: E402
from docs_users.models import TrackedUser  # noqa: E402
from jobs.models import Job, JobAttempt  # noqa: E402
from leadgen.models import Lead  # noqa: E402
from privacy import services  # noqa: E402
from privacy.selectors import subject_find, subject_named  # noqa: E402
from prototypes.models import Prototype, PrototypeEvent  # noqa: E402
from sources.models import InboundLead, InboundRequest, InboundSource  # noqa: E402
from stores.models import Store  # noqa: E402

# --- everyone else: generated in the database, a few seconds per 100,000 rows ------------------------

OTHERS_SQL = """
INSERT INTO tracking_store (franchise, name, account_id, store_uuid, lead_email, tracking_id, timezone,
                            quiet_hours_start, quiet_hours_end, is_active, reassign_overdue, created_at, updated_at)
SELECT 'Brand', 'Store ' || s, 'acct-' || s, md5('store' || s)::uuid, 'store' || s || '@example.com', 'ST' || s,
       'America/New_York', '21:00', '08:00', true, false, now(), now()
FROM generate_series(1, 20) AS s;

INSERT INTO leadgen_lead (channel, first_name, last_name, email, phone, company, message, service_type, steps,
                          source_page, utm, store_id, status, category, reasoning, classified_by, pipedrive_state,
                          pipedrive_lead_id, pipedrive_cc_email, preview_url, created_at, updated_at, lead_type,
                          email_subject, email_from, email_recipient, tracking_id, franchise, account_id, raw_body,
                          is_forwarded, forwarded_original_from, forwarded_original_to, forwarded_original_date,
                          parse_state, parse_error, processed_by, clickup_task_id, public_id, consent_text,
                          consent_version, is_test)
SELECT CASE WHEN i %% 10 < 7 THEN 'email' ELSE 'web_form' END, 'First' || i, 'Last' || i, 'lead' || i || '@example.com',
       '+1415' || lpad(i::text, 7, '0'), '', 'Message ' || i, '', '{}', '', '{}',
       (SELECT min(id) FROM tracking_store) + i %% 20, 'lead', '', '', 'rules', 'not_sent', '', '', '',
       now() - (i %% 129600) * interval '1 minute', now(), 'Web Lead', '', '', '', '', '', '',
       CASE WHEN i %% 10 < 7 THEN 'Name: First' || i || ' Last' || i || E'\\nEmail: lead' || i || '@example.com'
            ELSE '' END,
       false, '', '', '',
       CASE WHEN i %% 10 >= 7 THEN '' WHEN i %% 50 = 0 THEN 'failed' ELSE 'parsed' END,
       '', '', '', md5('lead' || i)::uuid, '', '', false
FROM generate_series(1, %(others)s) AS i;

INSERT INTO crm_contact (email, phone, company, store_id, franchise, account_id, lifecycle_stage, lead_status,
                         first_name, last_name, last_activity_at, created_at, updated_at)
SELECT 'lead' || i || '@example.com', '+1415' || lpad(i::text, 7, '0'), '',
       (SELECT min(id) FROM tracking_store) + i %% 20, 'Brand', 'acct', 'lead', 'new', 'First' || i, 'Last' || i,
       now(), now(), now()
FROM generate_series(1, %(others)s) AS i;

INSERT INTO crm_timelineevent (contact_id, store_id, franchise, account_id, event_type, event_category, entity_type,
                               entity_id, occurred_at, actor_type, new_value, idempotency_key, created_at)
SELECT c.id, c.store_id, 'Brand', 'acct', 'lead.created', 'lead', 'lead', c.id::text, now(), 'lead_webhook',
       jsonb_build_object('firstName', c.first_name, 'lastName', c.last_name), 'bench:' || c.id, now()
FROM crm_contact AS c;

INSERT INTO chat_chatsession (session_id, client_ip, first_seen_at, last_seen_at, lead_id)
SELECT 'bench-' || j, '192.0.2.1', now(), now(), NULL FROM generate_series(1, %(others)s / 5) AS j;

INSERT INTO chat_chatmessage (session_id, role, content, metadata, state, created_at)
SELECT s.id, CASE WHEN m %% 2 = 1 THEN 'user' ELSE 'assistant' END, 'Message ' || m || ' of ' || s.session_id,
       '{}', 'complete', now()
FROM chat_chatsession AS s, generate_series(1, 6) AS m;

INSERT INTO tracking_trackeduser (sub, email, given_name, family_name, company, last_channel, mcp_client,
                                  last_activity_at, mcp_tool_counts, mcp_agent_intents, docs_recent_pages,
                                  docs_page_counts, docs_product_areas, docs_getting_started_visits,
                                  docs_search_terms, kapa_questions, kapa_competitor_mentions,
                                  kapa_asked_thread_count, kapa_asked_questions, created_at, updated_at)
SELECT 'auth0|' || i, 'reader' || i || '@example.com', 'Reader', 'N' || i, '', '', '', now(), '{}', '[]', '[]', '{}',
       '{}', 0, '[]', '[]', '{}', 0, '[]', now(), now()
FROM generate_series(1, %(others)s / 10) AS i;

INSERT INTO jobs_job (kind, key, payload, status, attempts, max_attempts, run_after, last_error, created_at,
                      updated_at, finished_at)
SELECT (ARRAY['crm.lead_created', 'leadgen.pipedrive_sync', 'leadgen.confirmation_email', 'leadgen.lead_alert'])
           [1 + i %% 4],
       'bench:' || i, jsonb_build_object('lead_id', (SELECT min(id) FROM leadgen_lead) + i %% %(others)s),
       CASE WHEN i %% 1000 = 1 THEN 'pending' WHEN i %% 1000 = 2 THEN 'dead' ELSE 'succeeded' END,
       1, 8, now() - i * interval '1 second', '', now() - i * interval '1 second', now(), now()
FROM generate_series(1, %(other_jobs)s) AS i
"""


def seed_others():
    if Lead.objects.exists():
        raise BenchError("the database already holds leads: run on a fresh one (scripts/with-services)")
    started = time.monotonic()
    with connection.cursor() as cursor:
        for statement in OTHERS_SQL.split(";\n\n"):
            cursor.execute(statement, {"others": ARGS.others, "other_jobs": ARGS.other_jobs})
        cursor.execute("VACUUM ANALYZE")
    return round(time.monotonic() - started, 1)


# --- the person ------------------------------------------------------------------------------------

EMAIL, PHONE, FIRST, LAST = "zephyrine.q@orchard.example", "+14155550199", "Zephyrine", "Quillfeather"
LEADS = 250


def seed_person(store, source, staff):
    """The person's rows in every app, as the apps leave them; ORM bulk writes."""
    now = datetime.now(UTC)
    with transaction.atomic():
        leads = Lead.objects.bulk_create(
            Lead(channel="email" if n % 2 else "web_form", first_name=FIRST, last_name=LAST, email=EMAIL, phone=PHONE,
                 store=store, message=f"Call {FIRST} on {PHONE}", raw_body=f"Name: {FIRST} {LAST}\nEmail: {EMAIL}",
                 parse_state="parsed" if n % 2 else "", dedup_key=f"person#{n}#{time.time_ns()}" if n % 2 else None,
                 consent_text="I agree" if not n % 2 else "", consent_version="2026-12" if not n % 2 else "")
            for n in range(LEADS)
        )  # fmt: skip
        contact = Contact.objects.create(store=store, email=EMAIL, phone=PHONE, first_name=FIRST, last_name=LAST)
        Task.objects.bulk_create(
            Task(contact=contact, store=store, task_type="lead_outreach", type_category="lead_outreach",
                 source_type="lead", source_lead=lead, status="done", due_at=now,
                 action_needed_reason=f"New lead from {FIRST} {LAST}")
            for lead in leads[:50]
        )  # fmt: skip
        TimelineEvent.objects.bulk_create(
            TimelineEvent(contact=contact, store=store, event_type="lead.created", event_category="lead",
                          entity_type="lead", entity_id=str(leads[n % LEADS].pk), occurred_at=now,
                          new_value={"firstName": FIRST, "lastName": LAST}, idempotency_key=f"p:{time.time_ns()}:{n}")
            for n in range(ARGS.events)
        )  # fmt: skip
        kinds = ("leadgen.lead_alert", "leadgen.pipedrive_sync", "leadgen.confirmation_email", "crm.lead_created")
        made = Job.objects.bulk_create(
            Job(kind=kinds[n % 4], key=f"{kinds[n % 4]}:{leads[n // 4 % LEADS].pk}:{time.time_ns()}:{n}",
                payload={"lead_id": leads[n // 4 % LEADS].pk}, status="succeeded", finished_at=now)
            for n in range(ARGS.jobs - 1)
        )  # fmt: skip
        JobAttempt.objects.bulk_create(
            JobAttempt(job=job, number=1, started_at=now, outcome="succeeded") for job in made
        )
        Job.objects.create(
            kind="tracking.lead_retry", key=f"tracking.lead_retry:env:1:{time.time_ns()}", status="dead",
            payload={"lead": {"first_name": FIRST, "last_name": LAST, "email": EMAIL, "phone": PHONE}},
        )  # fmt: skip
        for number in range(2):
            session = ChatSession.objects.create(session_id=f"person-{time.time_ns()}", lead=leads[number])
            ChatMessage.objects.bulk_create(
                ChatMessage(session=session, role="user" if n % 2 else "assistant", content=f"{FIRST} here, {n}")
                for n in range(20)
            )
        prototype = Prototype.objects.create(lead=leads[0], state="completed", chat_id="v0-person")
        PrototypeEvent.objects.bulk_create(
            PrototypeEvent(prototype=prototype, number=n + 1, kind="progress", data={"title": f"{LAST} app"})
            for n in range(50)
        )
        TrackedUser.objects.create(sub=f"auth0|person{time.time_ns()}", email=EMAIL, given_name=FIRST,
                                   family_name=LAST, last_activity_at=now)  # fmt: skip
        request = InboundRequest.objects.create(
            source=source, outcome="created", signature_ok=True, lead=leads[1],
            body=json.dumps({"first_name": FIRST, "last_name": LAST, "email": EMAIL}),
        )  # fmt: skip
        InboundLead.objects.create(source=source, platform_id=f"p{time.time_ns()}", lead=leads[1], request=request)
        LogEntry.objects.log_actions(staff.pk, [contact], CHANGE, change_message="[]")


def person_left() -> int:
    """Rows that still name the person, in the tables that held them."""
    return (
        Lead.objects.filter(email=EMAIL).count() + Contact.objects.filter(email=EMAIL).count()
        + Job.objects.filter(payload__lead__email=EMAIL).count() + TrackedUser.objects.filter(email=EMAIL).count()
        + ChatMessage.objects.filter(content__contains=FIRST).count()
        + InboundRequest.objects.filter(body__contains=EMAIL).count()
        + LogEntry.objects.filter(object_repr__contains=FIRST).count()
    )  # fmt: skip


class Timed:
    """Wall time of a block; the CPU time this process and its PostgreSQL backend spent in it, which the
    machine's other tenants (and PostgreSQL's background workers) cannot inflate; and the cores the rest of
    the machine kept busy meanwhile."""

    def __init__(self, meter: CpuMeter):
        self.meter = meter
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            self.backend = cursor.fetchone()[0]

    def _cpu(self) -> float:
        times = os.times()
        return times.user + times.system + proc_stat(self.backend)[2]

    def __enter__(self):
        self.machine, self.own, self.started = self.meter.sample()["machine_busy"], self._cpu(), time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.wall = time.perf_counter() - self.started
        self.cpu = self._cpu() - self.own
        busy = self.meter.sample()["machine_busy"] - self.machine
        self.others = max(busy - self.cpu, 0.0) / max(self.wall, 1e-9)


class RolledBack(Exception):
    pass


def floor_erase(meter) -> Timed:
    """The ORM's cascade from the person's contact and leads, and nothing else; rolled back (done for real, it
    would orphan their chats and admin history where no email or phone finds them any more)."""
    try:
        with transaction.atomic():
            with Timed(meter) as timed:
                Task.objects.filter(contact__email=EMAIL).delete()
                Contact.objects.filter(email=EMAIL).delete()
                Lead.objects.filter(email=EMAIL).delete()
            raise RolledBack
    except RolledBack:
        return timed


def summary(timings):
    walls, cpus = [t.wall for t in timings], [t.cpu for t in timings]
    return {
        "median_s": round(statistics.median(walls), 3), "max_s": round(max(walls), 3),
        "min_s": round(min(walls), 3), "cpu_median_s": round(statistics.median(cpus), 3),
        "cpu_max_s": round(max(cpus), 3), "other_cores_median": round(statistics.median(t.others for t in timings), 2),
        "rounds": len(timings),
    }  # fmt: skip


def main():
    check_services()
    call_command("migrate", verbosity=0)
    seconds = seed_others()
    store = Store.objects.order_by("pk").first()
    source = InboundSource.objects.create(name="Generic", kind="generic", store=store)
    staff = get_user_model().objects.create_superuser("bench-dpo", password="bench password for the dpo")
    subject = subject_named(email=EMAIL)
    print(f"others seeded in {seconds} s: {ARGS.others} leads, contacts and events, {ARGS.other_jobs} jobs", flush=True)
    floor = "floor: ORM cascade from the contact and leads"
    find = "find (both start with it)"
    times = {"export": [], "erase": [], find: [], floor: []}
    meter = CpuMeter()
    rows = {}
    load_before = os.getloadavg()
    for round_number in range(ARGS.rounds):
        seed_person(store, source, staff)
        times[floor].append(floor_erase(meter))
        with Timed(meter) as timed, transaction.atomic():
            subject_find(subject)
        times[find].append(timed)
        with Timed(meter) as timed:
            document, _ = services.subject_export(subject=subject, actor="bench")
            text = json.dumps(document, cls=DjangoJSONEncoder, ensure_ascii=False)
        times["export"].append(timed)
        with Timed(meter) as timed:
            erasure = services.subject_erase(subject=subject, actor="bench")
        times["erase"].append(timed)
        rows = erasure.rows
        if left := person_left():
            raise BenchError(f"round {round_number + 1}: {left} row(s) still name the person")
        if rows["crm_timelineevent"] != ARGS.events or rows["jobs_job"] != ARGS.jobs:
            raise BenchError(f"round {round_number + 1}: erased {rows}")
        print(f"round {round_number + 1}: " + ", ".join(
            f"{name.split(' ')[0]} {t[-1].wall:.3f} s (CPU {t[-1].cpu:.3f} s, others {t[-1].others:.1f} cores)"
            for name, t in times.items()
        ), flush=True)  # fmt: skip
    load_after = os.getloadavg()
    results = {name: summary(values) for name, values in times.items()}
    met = results["export"]["max_s"] < ARGS.target_s and results["erase"]["max_s"] < ARGS.target_s
    ARGS.results.write_text(
        json.dumps(
            {
                "machine": machine_info(loadavg_before_measuring=load_before, loadavg_after_measuring=load_after),
                "data": {
                    "person": {"leads": LEADS, "timeline_events": ARGS.events, "jobs": ARGS.jobs},
                    "others": {"leads": ARGS.others, "contacts": ARGS.others, "timeline_events": ARGS.others,
                               "chat_messages": ARGS.others // 5 * 6, "jobs": ARGS.other_jobs},
                    "others_seed_seconds": seconds,
                },  # fmt: skip
                "rows_erased_per_round": rows,
                "export_document_mb": round(len(text) / 1e6, 1),
                "times": results,
                "target": {"slowest_under_s": ARGS.target_s, "met": met},
            },
            indent=2,
        )
        + "\n"
    )
    for name, figures in results.items():
        print(f"{name:48s} median {figures['median_s']:.3f} s   max {figures['max_s']:.3f} s   "
              f"CPU median {figures['cpu_median_s']:.3f} s")  # fmt: skip
    print(f"target {'met' if met else 'NOT met'}: export and erasure each under {ARGS.target_s} s in every round")
    return 0 if met else 1


if __name__ == "__main__":
    run(main, "privacy")
