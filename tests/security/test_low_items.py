"""Jobs, logs and alerts: replays fenced on status, no personal data in logs or job errors, the throttle
open when Redis is down, atomic breaker counters, visitor text escaped in alerts, docs pages delivered
without query strings, agent contexts redacted in admin, run messages flushed when a worker child exits."""

import logging
import re
import subprocess
import threading
import uuid

import pytest
from django.db import IntegrityError, connection, connections, transaction
from django.urls import reverse

import jobs
from docs_users import activity
from docs_users.models import TrackedUser
from docs_users.profile import crm_profile
from foundation import cache as foundation_cache
from jobs import runtime as job_runtime
from jobs import services as job_services
from jobs.breaker import CacheCircuitStorage
from jobs.models import Job
from tests.conftest import subprocess_env
from tests.jobs.test_workers import CELERY, stop, wait_until


@pytest.mark.django_db(transaction=True)
def test_two_replays_at_once_never_put_a_running_job_back_to_pending():
    job = jobs.enqueue("tests.permanent", {}, key=f"replay-race:{uuid.uuid4()}")
    job_runtime.job_run(job_id=job.pk)
    assert Job.objects.get(pk=job.pk).status == Job.Status.DEAD
    locked, result = threading.Event(), {}

    def worker_claims_it_meanwhile():
        try:
            with transaction.atomic():
                Job.objects.select_for_update().get(pk=job.pk)  # a first replay's row, being claimed
                locked.set()
                with connection.cursor() as cursor:  # wait until the second replay's UPDATE waits on the row
                    for _ in range(200):
                        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                                       " AND query ILIKE 'UPDATE \"jobs_job\"%%'")  # fmt: skip
                        if cursor.fetchone()[0]:
                            break
                        threading.Event().wait(0.02)
                Job.objects.filter(pk=job.pk).update(status=Job.Status.RUNNING)
        finally:
            connections.close_all()

    other = threading.Thread(target=worker_claims_it_meanwhile)
    other.start()
    locked.wait(10)
    result["replayed"] = job_services.jobs_replay(job_ids=[job.pk], actor="second")
    other.join(10)
    assert Job.objects.get(pk=job.pk).status == Job.Status.RUNNING, "the running job was left alone"
    assert result["replayed"] == 0


@pytest.mark.django_db
def test_request_logs_carry_paths_without_query_strings(client, caplog, settings):
    settings.CHAT_API_KEY = "chat-key"
    with caplog.at_level(logging.INFO):
        client.get("/api/leads/lookup?email=ada.secret@example.com", HTTP_X_CHAT_API_KEY="chat-key")
        client.get("/docs/callback?code=secret-oauth-code&state=s")
    text = caplog.text + " ".join(str(record.msg) for record in caplog.records)
    assert "/api/leads/lookup" in text
    assert "ada.secret" not in text and "secret-oauth-code" not in text


@jobs.handler("tests.unique_violation")
def _unique_violation(job):
    with transaction.atomic():
        for _ in range(2):
            TrackedUser.objects.create(sub=job.payload["sub"], last_activity_at="2026-01-01T00:00Z")


@pytest.mark.django_db
def test_a_database_error_in_a_job_is_recorded_without_the_values_it_quotes():
    job = jobs.enqueue("tests.unique_violation", {"sub": "private.person@example.com"}, key=f"scrub:{uuid.uuid4()}")
    job_runtime.job_run(job_id=job.pk)
    error = Job.objects.get(pk=job.pk).last_error
    assert IntegrityError.__name__ in error and "_unique_violation" in error, "type and frames stay for staff"
    assert "private.person" not in error, "PostgreSQL's DETAIL quotes the duplicate value"


@pytest.mark.django_db
def test_the_lead_throttle_lets_requests_through_when_redis_is_down(client, settings):
    settings.LLM_BASE_URL = ""
    settings.RECAPTCHA_SECRET_KEY = ""
    dead = "redis://127.0.0.1:1/0"
    settings.CACHES = {**settings.CACHES, "default": {**settings.CACHES["default"], "LOCATION": dead}}
    foundation_cache._redis_client.cache_clear()
    try:
        body = {"firstName": "Ada", "lastName": "L", "email": "ada@example.com", "company": "Acme",
                "message": "We need help with automation.", "serviceType": "strategic_advice"}  # fmt: skip
        response = client.post("/api/leads", body, content_type="application/json")
        assert response.status_code != 500
    finally:
        foundation_cache._redis_client.cache_clear()


def test_breaker_counters_are_atomic():
    storage = CacheCircuitStorage(f"test-{uuid.uuid4().hex[:6]}")
    storage.reset_counter()

    def count_failures():
        for _ in range(10):
            storage.increment_counter()

    threads = [threading.Thread(target=count_failures) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert storage.counter == 80


def test_visitor_text_cannot_plant_markdown_in_an_alert():
    from integrations.clickup.client import markdown_block, markdown_text

    name = markdown_text("[Call now](https://evil.example/x) ![i](https://evil.example/i.png) **urgent**")
    assert not re.search(r"(?<!\\)[\[\]()!*:]", name), "every Markdown character is escaped"
    block = markdown_block("```\n[link](https://evil.example)\n```")
    fence = block.split("text", 1)[0]
    assert len(fence) > 3 and block.endswith(fence) and block.count(fence) == 2


@pytest.mark.django_db
def test_docs_pages_are_delivered_without_query_strings_and_admin_shows_intents_redacted(admin_client):
    user = activity.tracked_user_sign_in(sub="auth0|q", channel="docs-login", email="q@acme.com")
    activity.docs_page_view_record(sub=user.sub, path="/docs/reset?token=abc123&email=q@acme.com")
    activity.mcp_tool_call_record(sub=user.sub, tool="search", context="write to jane.roe@bank.example")
    profile = crm_profile(TrackedUser.objects.get(pk=user.pk))
    assert profile["docs"]["docsRecentPages"] == ["/docs/reset"]
    assert profile["docs"]["docsTopPages"] == [{"path": "/docs/reset", "views": 1}]
    page = admin_client.get(reverse("admin:docs_users_trackeduser_change", args=[user.pk])).content.decode()
    assert "jane.roe@bank.example" not in page and "write to [EMAIL]" in page


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_run_messages_waiting_in_a_worker_child_are_sent_when_it_exits(runs, empty_broker):
    job = jobs.enqueue("tests.enqueue_follow_up", {"runs": runs.key}, key=f"flush:{uuid.uuid4()}")
    # The follow-up's run message would wait 60 s in the child's publisher; the child exits after one task,
    # and no sweep runs: only the flush on exit can send it.
    worker = subprocess.Popen(
        [*CELERY, "worker", "--include", "tests.jobs.handlers", "-P", "prefork", "-c", "1", "--max-tasks-per-child",
         "1", "-n", f"w{uuid.uuid4().hex[:8]}@%h", "--without-heartbeat", "--without-gossip", "--without-mingle",
         "--loglevel", "WARNING"],
        env=subprocess_env(JOBS_DISPATCH_LINGER_MS="60000"), start_new_session=True,
    )  # fmt: skip
    try:
        followed_up = lambda: runs.counts().get(f"{job.key}:follow-up") == 1  # noqa: E731
        wait_until(followed_up, timeout=120, message="the follow-up job")  # a loaded machine starts workers slowly
    finally:
        stop(worker)
