"""The background processor against a local V0 v2 server: every way a generation can go."""

import socket
import threading
from datetime import timedelta

import pytest
from django.core import mail
from django.db import close_old_connections
from django.utils import timezone

from jobs import runtime as job_runtime
from jobs.models import Job
from leadgen import previews as lead_previews
from leadgen.ratelimit import prototype_buckets_hold, prototype_buckets_state
from prototypes import processor, services
from prototypes.models import Prototype
from tests.prototypes.conftest import make_lead, run_jobs, run_next_check

pytestmark = pytest.mark.django_db

EMAIL, IP = "ada@analytical.example", "192.0.2.10"


@pytest.fixture
def held_lead():
    """A diagnostic lead whose intake took the hold on both buckets, as POST /api/leads does."""
    assert prototype_buckets_hold(email=EMAIL, ip=IP) is None
    return make_lead()


def buckets():
    state = prototype_buckets_state(email=EMAIL, ip=IP)
    return {name: (bucket.in_progress, bucket.used) for name, bucket in state.items()}


def test_a_lead_nobody_watches_is_generated_and_delivered_by_the_processor(fake_v0, held_lead):
    fake_v0.behaviour.auto_finish = True
    prototype = held_lead.prototype
    assert prototype.state == Prototype.State.QUEUED
    first = Job.objects.get(kind="prototypes.check")
    assert first.run_after - prototype.created_at >= timedelta(seconds=119), "the first check waits ~2 minutes"

    run_next_check()  # starts it
    prototype.refresh_from_db()
    assert prototype.state == Prototype.State.GENERATING and prototype.chat_id
    [created] = fake_v0.requests_to("/chats/async")
    assert created["metadata"] == {"leadKey": str(held_lead.public_id)}
    assert "monthly reporting" in created["message"] and "Finance & reporting" in created["message"]
    assert EMAIL not in created["message"] and "Lovelace" not in created["message"], "no contact details to V0"
    assert buckets() == {"email": (True, 0), "ip": (True, 0)}

    run_next_check()  # finds it done
    assert not Job.objects.filter(kind="prototypes.check", status=Job.Status.PENDING).exists(), "checks stop"
    run_jobs("prototypes.")
    prototype.refresh_from_db()
    held_lead.refresh_from_db()
    assert prototype.state == Prototype.State.COMPLETED
    assert held_lead.preview_url == prototype.preview_url == f"https://preview.example.com/{prototype.chat_id}"
    assert buckets() == {"email": (False, 1), "ip": (False, 1)}, "quota consumed on both buckets, hold dropped"
    [email] = mail.outbox
    assert email.subject == "Your prototype is ready" and email.to == [EMAIL]
    assert prototype.preview_url in email.body and str(held_lead.public_id) in email.body
    skipped = set(
        Job.objects.filter(kind__in=["prototypes.ready_note", "prototypes.ready_alert"]).values_list(
            "status", flat=True
        )
    )
    assert skipped == {"skipped"}, "Pipedrive and ClickUp are off in this test: recorded as skipped"


def test_plan_mode_is_approved_then_built(fake_v0, held_lead):
    fake_v0.behaviour.auto_finish = True
    fake_v0.behaviour.outcomes = ["plan", "stop"]
    run_next_check()
    run_next_check()  # the plan
    [resolve] = fake_v0.requests_to("/messages/resolve/async")
    assert resolve["task"]["type"] == "plan-exit-response" and resolve["task"]["status"] == "approved"
    assert resolve["task"]["content"]
    prototype = Prototype.objects.get()
    assert prototype.state == Prototype.State.GENERATING
    assert "Plan approved" in prototype.event_log.last().data["status"]
    run_next_check()
    assert Prototype.objects.get().state == Prototype.State.COMPLETED


def test_an_interrupted_generation_is_continued_at_most_three_times_then_fails_without_quota(fake_v0, held_lead):
    fake_v0.behaviour.auto_finish = True
    fake_v0.behaviour.outcomes = ["length"]
    run_next_check()
    for attempt in range(1, 4):
        run_next_check()
        assert Prototype.objects.get().continue_attempts == attempt
    assert len(fake_v0.requests_to("/messages/async")) == 3
    run_next_check()
    prototype = Prototype.objects.get()
    assert prototype.state == Prototype.State.FAILED and "interrupted (length)" in prototype.last_error
    assert prototype.event_log.last().kind == "error"
    run_jobs("prototypes.")
    assert buckets() == {"email": (False, 0), "ip": (False, 0)}, "hold dropped, nothing consumed"
    assert Job.objects.get(kind="prototypes.failed_alert").status == "skipped", "sales alert (ClickUp off here)"


def test_an_interrupted_generation_that_recovers_completes(fake_v0, held_lead):
    fake_v0.behaviour.auto_finish = True
    fake_v0.behaviour.outcomes = ["length", "stop"]
    run_next_check()
    run_next_check()
    run_next_check()
    assert Prototype.objects.get().state == Prototype.State.COMPLETED


def test_a_generation_past_15_minutes_is_stale_recovered_three_times_then_failed(fake_v0, held_lead):
    fake_v0.behaviour.outcomes = ["generating"]
    run_next_check()
    prototype = Prototype.objects.get()
    clock = prototype.generating_since

    processor.prototype_check(prototype_id=prototype.pk, now=clock + timedelta(minutes=14))
    assert Prototype.objects.get().state == Prototype.State.GENERATING, "14 minutes: still fine"
    for attempt in range(1, 4):
        clock += timedelta(minutes=16)
        processor.prototype_check(prototype_id=prototype.pk, now=clock)
        prototype.refresh_from_db()
        assert prototype.recovery_attempts == attempt and prototype.generating_since == clock
    assert len(fake_v0.requests_to("/stop")) == 3, "each recovery stops the stuck message first"
    assert len(fake_v0.requests_to("/messages/async")) == 3
    processor.prototype_check(prototype_id=prototype.pk, now=clock + timedelta(minutes=16))
    prototype.refresh_from_db()
    assert prototype.state == Prototype.State.FAILED and "stale" in prototype.last_error
    run_jobs("prototypes.")
    assert buckets() == {"email": (False, 0), "ip": (False, 0)}


@pytest.mark.parametrize("status", [401, 422])
def test_v0_refusing_the_chat_is_permanent(fake_v0, held_lead, status):
    fake_v0.behaviour.create_status = status
    job = run_next_check()
    assert job.status == "succeeded", "the check itself did its job: it failed the prototype"
    prototype = Prototype.objects.get()
    assert prototype.state == Prototype.State.FAILED and f"HTTP {status}" in prototype.last_error
    assert len(fake_v0.requests_to("/chats/async")) == 1, "not retried"


def test_v0_failing_or_too_slow_is_retried(fake_v0, held_lead, settings):
    fake_v0.behaviour.create_status = 503
    run_next_check()
    prototype = Prototype.objects.get()
    assert prototype.state == Prototype.State.GENERATING and not prototype.chat_id
    assert "HTTP 503" in prototype.last_error
    fake_v0.behaviour.create_status = None
    fake_v0.behaviour.auto_finish = True
    run_next_check()
    assert Prototype.objects.get().chat_id, "the next check started it"
    assert len(fake_v0.chats) == 1


def test_a_check_whose_v0_call_times_out_is_retried_by_the_job_layer(fake_v0, held_lead, settings):
    fake_v0.behaviour.auto_finish = True
    run_next_check()
    with socket.socket() as silent:  # accepts connections (backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        settings.V0_API_URL = f"http://127.0.0.1:{silent.getsockname()[1]}/v2"
        settings.HTTP_READ_TIMEOUT = 0.3
        job = run_next_check()
    assert job.status == "pending" and job.attempts == 1 and "timed out" in job.last_error
    settings.V0_API_URL = fake_v0.url
    Job.objects.filter(pk=job.pk).update(run_after=timezone.now())
    job_runtime.job_run(job_id=job.pk)
    assert Prototype.objects.get().state == Prototype.State.COMPLETED


def test_a_retry_after_a_lost_answer_finds_the_chat_instead_of_creating_a_second(fake_v0, held_lead):
    run_next_check()
    prototype = Prototype.objects.get()
    Prototype.objects.filter(pk=prototype.pk).update(chat_id="", message_id="")  # the answer never came back
    run_next_check()
    assert Prototype.objects.get().chat_id == prototype.chat_id
    assert len(fake_v0.chats) == 1 and len(fake_v0.requests_to("/chats/async")) == 1


def test_a_check_whose_worker_died_is_reclaimed_and_finishes(fake_v0, held_lead):
    fake_v0.behaviour.auto_finish = True
    run_next_check()
    job = Job.objects.get(kind="prototypes.check", status=Job.Status.PENDING)
    Job.objects.filter(pk=job.pk).update(run_after=timezone.now())
    assert job_runtime.job_claim(job_id=job.pk) is not None  # a worker took it, then died
    Job.objects.filter(pk=job.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert job_runtime.jobs_sweep()["reclaimed"] == 1
    job_runtime.job_run(job_id=job.pk)
    job.refresh_from_db()
    assert (job.status, job.attempts) == ("succeeded", 2)
    assert Prototype.objects.get().state == Prototype.State.COMPLETED


@pytest.mark.django_db(transaction=True)
def test_concurrent_checks_complete_once_and_consume_the_quota_once(fake_v0):
    assert prototype_buckets_hold(email=EMAIL, ip=IP) is None
    make_lead()
    fake_v0.behaviour.auto_finish = True
    run_next_check()
    prototype = Prototype.objects.get()
    barrier = threading.Barrier(4)

    def check():
        barrier.wait()
        try:
            processor.prototype_check(prototype_id=prototype.pk)
        finally:
            close_old_connections()

    threads = [threading.Thread(target=check) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert Prototype.objects.get().state == Prototype.State.COMPLETED
    assert prototype.event_log.filter(kind="complete").count() == 1
    assert Job.objects.filter(kind="prototypes.finished").count() == 1
    assert Job.objects.filter(kind="prototypes.ready_email").count() == 1
    run_jobs("prototypes.")
    # The settlement itself is once-only too, should its job ever run twice.
    lead_previews.lead_prototype_settle(lead=prototype.lead, completed=True, once_key=f"prototype:{prototype.pk}")
    assert buckets() == {"email": (False, 1), "ip": (False, 1)}


def test_a_hold_lives_as_long_as_its_prototype_is_checked(fake_v0, held_lead, settings):
    settings.LEADS_PROTOTYPE_HOLD_SECONDS = 1
    fake_v0.behaviour.outcomes = ["generating"]
    run_next_check()
    assert run_jobs("prototypes.checked") == 1
    assert buckets()["email"][0] is True, "each check renews the hold"


def test_staff_cancel_drops_the_hold_and_retry_continues_on_the_same_chat(fake_v0, held_lead):
    fake_v0.behaviour.outcomes = ["generating", "stop"]
    run_next_check()
    prototype = Prototype.objects.get()
    assert services.prototype_cancel(prototype_id=prototype.pk, actor="sam") is True
    run_jobs("prototypes.finished")
    assert buckets() == {"email": (False, 0), "ip": (False, 0)}
    assert not Job.objects.filter(kind="prototypes.failed_alert").exists(), "staff cancelled it: no alert"

    assert services.prototype_retry(prototype_id=prototype.pk, actor="sam") is True
    fake_v0.behaviour.auto_finish = True
    Prototype.objects.filter(pk=prototype.pk).update(generating_since=timezone.now() - timedelta(minutes=20))
    run_next_check()  # stale: stops the old message and continues on the same chat, which finishes
    assert Prototype.objects.get().state == Prototype.State.COMPLETED
    assert len(fake_v0.requests_to("/stop")) == 1
    assert len(fake_v0.chats) == 1


def test_the_safety_net_reschedules_prototypes_whose_checks_stopped(fake_v0, held_lead):
    run_next_check()
    Job.objects.filter(kind="prototypes.check", status=Job.Status.PENDING).update(status=Job.Status.DEAD)
    since = timezone.now() - timedelta(days=1)
    assert services.prototypes_recover(since=since, dry_run=True) == {"found": 1, "rescheduled": 0}
    assert services.prototypes_recover(since=since) == {"found": 1, "rescheduled": 1}
    assert services.prototypes_recover(since=since) == {"found": 0, "rescheduled": 0}, "deduplicated"
    assert Job.objects.filter(kind="prototypes.check", status=Job.Status.PENDING).count() == 1


def test_without_a_v0_key_the_prototype_fails_at_once_and_says_so(settings, held_lead):
    settings.V0_API_KEY = ""
    job = run_next_check()
    assert (job.status, job.last_error) == ("skipped", "skipped: not configured: V0_API_KEY is empty")
    prototype = Prototype.objects.get()
    assert prototype.state == Prototype.State.FAILED
    assert "not available" in prototype.event_log.last().data["message"]
    run_jobs("prototypes.")
    assert buckets() == {"email": (False, 0), "ip": (False, 0)}


def test_completions_in_a_batch_are_each_completed_once_as_a_check_completes_one(fake_v0):
    """prototypes_complete (the relays' hand-overs): the event logged, the lead's finished job (its
    preview), alert, note and email jobs queued; a prototype that has ended already is left as it is."""
    leads = [make_lead(email=f"batch{i}@example.com", client_ip=f"192.0.2.{i + 50}") for i in range(3)]
    prototypes = [lead.prototype for lead in leads]
    services.prototype_cancel(prototype_id=prototypes[2].pk, actor="staff")
    previews = [(p.pk, f"https://preview.example.com/{p.pk}") for p in prototypes]
    logged = processor.prototypes_complete(previews=previews)
    assert [(event.prototype_id, event.kind) for event in logged] == [(p.pk, "complete") for p in prototypes[:2]]
    run_jobs("prototypes.finished")
    for prototype, lead in zip(prototypes[:2], leads[:2], strict=True):
        prototype.refresh_from_db()
        lead.refresh_from_db()
        assert prototype.state == Prototype.State.COMPLETED and prototype.finished_at
        assert lead.preview_url == prototype.preview_url == f"https://preview.example.com/{prototype.pk}"
        last = prototype.event_log.last()
        assert (last.number, last.kind, last.data["previewUrl"]) == (prototype.events, "complete", lead.preview_url)
        kinds = set(Job.objects.filter(payload__prototype_id=prototype.pk).values_list("kind", flat=True))
        assert {"prototypes.ready_alert", "prototypes.ready_note", "prototypes.ready_email"} <= kinds
        assert Job.objects.filter(kind="prototypes.finished", payload__prototype_id=prototype.pk).count() == 1
    prototypes[2].refresh_from_db()
    assert prototypes[2].state == Prototype.State.FAILED
    assert not processor.prototypes_complete(previews=previews), "once"
