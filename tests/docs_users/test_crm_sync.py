"""The daily sync, profile delivery to a local fake CRM, retention, triggers, admin and backfill."""

import json
import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from io import StringIO
from pathlib import Path

import jsonschema
import pytest
from django.core.management import call_command
from django.utils import timezone

import jobs
from crm.redaction import find_pii
from docs_users import activity, sync
from docs_users.models import TrackedUser
from jobs.models import Job
from jobs.runtime import jobs_sweep
from standins.crm_receiver import CrmReceiver
from standins.kapa import Kapa
from tests.conftest import subprocess_env
from tests.integrations.test_kapa import API_KEY, NOW, OWNER_ID, PROJECT, SALT, SUB, thread
from tests.tracking.support import run_jobs

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
INVOKE_SECRET = "invoke-secret-for-tests"
SCHEMA = json.loads((Path(__file__).parents[2] / "docs_users/schemas/crm-profile.v1.json").read_text())


def subs(crm: CrmReceiver) -> list[str]:
    return sorted(profile["sub"] for profile in crm.profiles)


def delivered(crm: CrmReceiver) -> list:
    """The deliveries the receiver took (answered 204), in order."""
    return [item for item in crm.received() if item.detail["answered"] == 204]


@pytest.fixture
def crm(settings):
    with CrmReceiver(signing_secret=SECRET) as receiver:
        settings.CRM_WEBHOOK_URL = receiver.url
        settings.CRM_SIGNING_SECRET = SECRET
        settings.JOBS_BACKOFF_BASE_SECONDS = 0
        yield receiver


def make_users(count, *, prefix="auth0|u", pending=True):
    now = timezone.now()
    TrackedUser.objects.bulk_create(
        TrackedUser(
            sub=f"{prefix}{n}",
            email=f"user{n}@acme.com",
            company="Acme",
            last_activity_at=now,
            pending_since=now - timedelta(seconds=count - n) if pending else None,
        )
        for n in range(count)
    )


def run_sync():
    job = sync.profile_sync_start(reason="test")
    run_jobs(sync.SYNC_KIND)
    return job


def test_a_delivered_profile_is_signed_grouped_by_source_valid_and_masks_our_free_text(crm):
    activity.tracked_user_sign_in(
        sub="auth0|ada", channel="docs-login", email="ada@acme.com", given_name="Ada", family_name="Lovelace"
    )
    activity.mcp_tool_call_record(
        sub="auth0|ada",
        tool="search_docs",
        user_agent="claude-code/1.0",
        context="customer ada.l@bank.example card 4111 1111 1111 1111 token sk_live_51H8abcdefghijklmnopqrstuv",
    )
    activity.docs_page_view_record(
        sub="auth0|ada", path="/current/get-started/", search_term="connect from 10.0.12.7 with password=hunter22"
    )
    TrackedUser.objects.filter(sub="auth0|ada").update(kapa_questions=["How do I size a cluster for <PERSON>?"])

    run_sync()

    (delivery,) = delivered(crm)
    assert delivery.detail["signature"] == "valid"
    (profile,) = crm.profiles
    jsonschema.validate(profile, SCHEMA, format_checker=jsonschema.FormatChecker())
    assert delivery.detail["webhook-id"].startswith("tracking.deliver_profile:")
    assert profile["identity"] | {"signedUpAt": None, "lastSignInAt": None, "lastActivityAt": None} == {
        "email": "ada@acme.com", "givenName": "Ada", "familyName": "Lovelace", "company": "Acme",
        "lastChannel": "docs-login", "signedUpAt": None, "lastSignInAt": None, "lastActivityAt": None,
    }  # fmt: skip
    assert profile["mcp"]["mcpTools"] == {"search_docs": 1} and profile["mcp"]["mcpClient"] == "Claude Code"
    assert profile["docs"]["docsGettingStartedVisits"] == 1
    assert profile["kapa"]["kapaQuestions"] == ["How do I size a cluster for <PERSON>?"]  # masked by Kapa, as is
    free_text = [i["context"] for i in profile["mcp"]["mcpAgentIntents"]] + profile["docs"]["docsSearchQueries"]
    assert free_text == ["customer [EMAIL] card [CARD] token [TOKEN]", "connect from [IP] with password=[SECRET]"]
    assert not any(find_pii(text) for text in free_text)
    for leaked in ("ada.l@bank.example", "4111", "sk_live", "10.0.12.7", "hunter22"):
        assert leaked not in delivery.body

    user = TrackedUser.objects.get(sub="auth0|ada")
    assert not user.is_pending and user.last_delivered_payload == profile and user.last_delivered_at


def test_the_sync_touches_only_pending_users_and_clears_their_markers(crm):
    make_users(5, prefix="auth0|idle", pending=False)
    make_users(3, prefix="auth0|active")
    run_sync()
    assert subs(crm) == ["auth0|active0", "auth0|active1", "auth0|active2"]
    assert not TrackedUser.objects.filter(pending_since__isnull=False).exists()
    assert Job.objects.filter(kind=sync.DELIVER_KIND, status="succeeded").count() == 3
    run_sync()  # nothing pending: nothing sent again
    assert len(crm.profiles) == 3


def test_a_capture_during_the_sync_keeps_the_user_pending_for_the_next_one(crm):
    make_users(1)
    user = TrackedUser.objects.get()
    read_marker = user.pending_since
    activity.mcp_tool_call_record(sub=user.sub, tool="search_docs")  # after the sync read the row
    (delivery,) = sync._queue_deliveries([sync.PendingUser(user.pk, read_marker, user.sub)])
    sync._deliver_now(delivery, kapa_client=None)
    assert TrackedUser.objects.get().is_pending
    assert crm.profiles[0]["mcp"]["mcpTools"] == {"search_docs": 1}  # the delivery carries the latest state


def test_a_crm_5xx_is_retried_and_the_profile_delivered_once(crm):
    crm.failures = [503, 500]
    make_users(1)
    run_sync()
    delivery = Job.objects.get(kind=sync.DELIVER_KIND)
    assert delivery.status == "pending" and "HTTP 503" in delivery.last_error
    run_jobs(sync.DELIVER_KIND)
    run_jobs(sync.DELIVER_KIND)
    delivery.refresh_from_db()
    assert delivery.status == "succeeded" and delivery.attempts == 3
    assert subs(crm) == ["auth0|u0"]


def test_a_crm_400_dead_letters_the_delivery(crm):
    crm.failures = [400]
    make_users(1)
    run_sync()
    delivery = Job.objects.get(kind=sync.DELIVER_KIND)
    assert delivery.status == "dead" and "HTTP 400" in delivery.last_error
    assert crm.profiles == [] and TrackedUser.objects.get().last_delivered_at is None


def test_without_a_webhook_url_nothing_is_sent_and_deliveries_are_skipped(httpserver, settings):
    settings.CRM_WEBHOOK_URL = ""
    make_users(2)
    run_sync()
    assert [job.status for job in Job.objects.filter(kind=sync.DELIVER_KIND)] == ["skipped", "skipped"]
    assert httpserver.log == []
    assert not TrackedUser.objects.filter(pending_since__isnull=False).exists()


def test_the_sync_refreshes_kapa_engagement_before_delivering(crm, kapa_stand_in):
    kapa_stand_in.threads[OWNER_ID] = [
        thread(1, "Is Confluent faster?", minutes_ago=30),
        thread(2, "Tiered storage?", minutes_ago=5),
    ]
    activity.tracked_user_sign_in(sub=SUB, channel="docs-login", email="kim@acme.com")
    run_sync()
    kapa = crm.profiles[0]["kapa"]
    assert kapa["kapaConversations"] == 2 and kapa["kapaQuestions"] == ["Tiered storage?", "Is Confluent faster?"]
    assert TrackedUser.objects.get().kapa_competitor_mentions == {"Confluent": 1}


@pytest.fixture
def kapa_stand_in(settings):
    """Kapa's stand-in, the product pointed at it."""
    with Kapa(api_key=API_KEY, project_id=PROJECT) as stand_in:
        settings.KAPA_API_URL = stand_in.origin
        settings.KAPA_API_KEY, settings.KAPA_PROJECT_ID, settings.KAPA_OWNER_SALT = API_KEY, PROJECT, SALT
        settings.KAPA_COMPETITORS = ["Confluent", "Redpanda"]
        yield stand_in


def test_questions_asked_through_mcp_are_merged_with_the_widget_threads(crm, kapa_stand_in):
    kapa_stand_in.threads[OWNER_ID] = [
        thread(1, "Is Confluent faster?", minutes_ago=30),
        thread(2, "Tiered storage?", minutes_ago=5),
    ]
    activity.tracked_user_sign_in(sub=SUB, channel="docs-login", email="kim@acme.com")
    for thread_id, question, minutes_ago in (("t-1", "Redpanda vs us?", 60), ("t-2", "How do I enable TLS?", 1)):
        activity.kapa_question_record(
            sub=SUB, thread_id=thread_id, question=question, at=NOW - timedelta(minutes=minutes_ago)
        )
    run_sync()
    kapa = crm.profiles[0]["kapa"]
    assert kapa["kapaConversations"] == 4
    # Newest first across both: the widget's questions are dated by their thread's last activity.
    assert kapa["kapaQuestions"] == [
        "How do I enable TLS?", "Tiered storage?", "Is Confluent faster?", "Redpanda vs us?"
    ]  # fmt: skip
    assert kapa["kapaLastInteractionAt"] == (NOW - timedelta(minutes=1)).isoformat()
    assert TrackedUser.objects.get().kapa_competitor_mentions == {"Confluent": 1, "Redpanda": 1}


def test_a_user_who_only_asked_through_mcp_has_kapa_engagement(crm, kapa_stand_in):
    asked_at = timezone.now() - timedelta(minutes=3)
    activity.kapa_question_record(sub=SUB, thread_id="t-1", question="Does Confluent  Cloud work?", at=asked_at)
    activity.kapa_question_record(sub=SUB, thread_id="t-2", question="Mail me at kim@acme.com", at=asked_at)
    assert TrackedUser.objects.get().is_pending  # asking is activity: the next sync delivers the user
    run_sync()
    kapa = crm.profiles[0]["kapa"]
    assert kapa["kapaConversations"] == 2
    # Our own capture of free text: whitespace collapsed and personal data masked, as the widget's questions are.
    assert kapa["kapaQuestions"] == ["Mail me at [EMAIL]", "Does Confluent Cloud work?"]
    assert kapa["kapaLastInteractionAt"] == asked_at.isoformat()
    assert TrackedUser.objects.get().kapa_competitor_mentions == {"Confluent": 1}


def test_asked_questions_are_capped_per_user_and_the_threads_still_counted(crm, kapa_stand_in):
    for n in range(activity.KAPA_ASKED_QUESTIONS_CAP + 5):
        activity.kapa_question_record(sub=SUB, thread_id=f"t-{n}", question=f"Question {n}?")
    # A thread already recorded is not counted twice (a question Kapa's Chat answers always starts a new one).
    last = activity.KAPA_ASKED_QUESTIONS_CAP + 4
    activity.kapa_question_record(sub=SUB, thread_id=f"t-{last}", question="A follow-up in an old thread?")
    user = TrackedUser.objects.get()
    assert len(user.kapa_asked_questions) == activity.KAPA_ASKED_QUESTIONS_CAP
    assert user.kapa_asked_thread_count == activity.KAPA_ASKED_QUESTIONS_CAP + 5
    assert user.kapa_asked_questions[0]["question"] == "A follow-up in an old thread?"
    run_sync()
    kapa = crm.profiles[0]["kapa"]
    assert kapa["kapaConversations"] == activity.KAPA_ASKED_QUESTIONS_CAP + 5
    assert len(kapa["kapaQuestions"]) == activity.KAPA_ASKED_QUESTIONS_CAP


def test_when_kapa_fails_the_profile_keeps_the_last_engagement_whole(crm, kapa_stand_in):
    kapa_stand_in.fail_next(503, {"detail": "Service unavailable."})
    activity.tracked_user_sign_in(sub=SUB, channel="docs-login", email="kim@acme.com")
    TrackedUser.objects.update(kapa_thread_count=3, kapa_questions=["Tiered storage?"])
    activity.kapa_question_record(sub=SUB, thread_id="t-1", question="How do I enable TLS?")
    run_sync()
    kapa = crm.profiles[0]["kapa"]
    assert kapa["kapaConversations"] == 3 and kapa["kapaQuestions"] == ["Tiered storage?"]
    # Still recorded: the next sync that reaches Kapa merges it.
    assert TrackedUser.objects.get().kapa_asked_thread_count == 1


def test_past_its_time_budget_the_sync_queues_its_continuation_which_finishes(crm, settings):
    settings.TRACKING_SYNC_TIME_BUDGET_SECONDS = 0
    make_users(3)
    shards = run_sync()
    assert crm.profiles == [] and TrackedUser.objects.filter(pending_since__isnull=False).count() == 3
    settings.TRACKING_SYNC_TIME_BUDGET_SECONDS = 60
    run_jobs(sync.SYNC_KIND)
    assert subs(crm) == ["auth0|u0", "auth0|u1", "auth0|u2"]
    assert all(Job.objects.filter(key=f"{shard.key}#2", status="succeeded").exists() for shard in shards)


def test_shards_split_the_pending_users_and_each_delivers_only_its_own(crm, settings):
    settings.TRACKING_SYNC_SHARDS = 3
    make_users(9)
    shards = sync.profile_sync_start(reason="test")
    assert [job.payload["shard"] for job in shards] == [0, 1, 2]

    jobs.run_now(shards[1].pk)
    ids = TrackedUser.objects.filter(pending_since__isnull=True).values_list("id", flat=True)
    assert len(crm.profiles) == 3 and all(user_id % 3 == 1 for user_id in ids)
    run_jobs(sync.SYNC_KIND)
    assert len(subs(crm)) == 9 and not TrackedUser.objects.filter(pending_since__isnull=False).exists()


@pytest.mark.slow
def test_a_sync_killed_midway_resumes_and_every_pending_user_is_delivered(crm, settings):
    crm.delay = 0.05
    make_users(60)
    settings.TRACKING_SYNC_SHARDS = 1
    (job,) = sync.profile_sync_start(reason="test")
    env = subprocess_env(CRM_WEBHOOK_URL=crm.url, CRM_SIGNING_SECRET=SECRET, TRACKING_SYNC_CONCURRENCY=2)
    code = f"import django; django.setup(); import jobs; jobs.run_now({job.pk})"
    worker = subprocess.Popen([sys.executable, "-c", code], env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while len(crm.profiles) < 10 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(timeout=10)
    delivered_before = len(crm.profiles)
    assert 10 <= delivered_before < 60
    job.refresh_from_db()
    assert job.status == "running"

    # After the lease: the sweep takes the sync back, and another run finishes what is pending.
    Job.objects.filter(status="running").update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    settings.CRM_WEBHOOK_URL, settings.CRM_SIGNING_SECRET = crm.url, SECRET
    assert jobs_sweep()["reclaimed"] >= 1
    run_jobs(sync.SYNC_KIND)
    run_jobs(sync.DELIVER_KIND)  # ones queued but not yet run when the worker died

    assert set(subs(crm)) == {f"auth0|u{n}" for n in range(60)}
    assert not TrackedUser.objects.filter(pending_since__isnull=False).exists()
    ids_per_sub = {}
    for delivery, profile in zip(delivered(crm), crm.profiles, strict=True):
        ids_per_sub.setdefault(profile["sub"], set()).add(delivery.detail["webhook-id"])
    assert all(len(ids) == 1 for ids in ids_per_sub.values())  # a repeat carries the same id: the CRM drops it


def test_retention_deletes_only_users_without_genuine_activity_in_batches(settings, crm):
    settings.LEAD_RETENTION_DAYS = 30
    settings.TRACKING_RETENTION_BATCH = 2
    old = timezone.now() - timedelta(days=31)
    make_users(5, prefix="auth0|gone", pending=False)
    TrackedUser.objects.update(last_activity_at=old, last_delivered_at=timezone.now(), kapa_refreshed_at=timezone.now())
    activity.tracked_user_sign_in(sub="auth0|stays", channel="mcp", at=timezone.now() - timedelta(days=29))

    sync.retention_start()
    while run_jobs(sync.RETENTION_KIND):
        pass
    assert list(TrackedUser.objects.values_list("sub", flat=True)) == ["auth0|stays"]
    assert Job.objects.filter(kind=sync.RETENTION_KIND).count() == 3  # 2 + 2 + 1, each full batch queued the next


def test_the_beat_trigger_only_queues_the_sync_and_retention_jobs(crm, settings):
    from docs_users.tasks import daily_sync

    make_users(2)
    daily_sync()
    assert crm.profiles == []  # nothing done in the trigger itself
    kinds = sorted(Job.objects.values_list("kind", flat=True))
    assert kinds == [sync.RETENTION_KIND] + [sync.SYNC_KIND] * settings.TRACKING_SYNC_SHARDS
    run_jobs(sync.SYNC_KIND)
    assert len(crm.profiles) == 2


@pytest.mark.parametrize("path", ["/internal/tracking/sync", "/internal/tracking/retention"])
def test_internal_triggers_need_the_invoke_secret(client, settings, path):
    settings.CRM_INVOKE_SECRET = ""
    assert client.post(path, HTTP_AUTHORIZATION=f"Bearer {INVOKE_SECRET}").status_code == 404
    settings.CRM_INVOKE_SECRET = INVOKE_SECRET
    for wrong in ("", "Bearer nope", f"Basic {INVOKE_SECRET}", f"Bearer {INVOKE_SECRET}x"):
        response = client.post(path, HTTP_AUTHORIZATION=wrong)
        assert response.status_code == 401 and response.json()["error"]["code"] == "invalid_credentials"
    assert not Job.objects.exists()
    response = client.post(path, HTTP_AUTHORIZATION=f"Bearer {INVOKE_SECRET}")
    assert response.status_code == 202
    queued = {(job["jobId"], job["key"]) for job in response.json()["jobs"]}
    assert queued == set(Job.objects.values_list("id", "key")) and queued


def test_deliver_profiles_command(crm):
    make_users(3)
    out = StringIO()
    call_command("deliver_profiles", "--all-pending", "--dry-run", stdout=out)
    assert "would queue 3 deliveries" in out.getvalue() and not Job.objects.exists()
    call_command("deliver_profiles", "--sub", "auth0|u1", stdout=out)
    run_jobs(sync.DELIVER_KIND)
    assert subs(crm) == ["auth0|u1"]
    call_command("deliver_profiles", "--all-pending", stdout=out)
    run_jobs(sync.DELIVER_KIND)
    assert subs(crm) == ["auth0|u0", "auth0|u1", "auth0|u2"]
    assert not TrackedUser.objects.filter(pending_since__isnull=False).exists()
