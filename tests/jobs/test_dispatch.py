"""Run messages of committed jobs, batched by the publisher thread (jobs/dispatch.py), on the real broker."""

import base64
import json
import os
import threading
import time

import pytest
import redis
from django.conf import settings
from django.test import override_settings

import jobs
from jobs import JobSpec
from jobs.dispatch import RunMessageBatcher, run_messages

pytestmark = pytest.mark.django_db


def broker():
    return redis.Redis.from_url(settings.CELERY_BROKER_URL)


def messages_since(queued):
    """(task name, args) of the messages published after the queue held `queued`, oldest first."""
    raw = broker().lrange("celery", 0, broker().llen("celery") - queued - 1)
    out = []
    for item in reversed(raw):  # LPUSH: newest first
        message = json.loads(item)
        args, _kwargs, _embed = json.loads(base64.b64decode(message["body"]))
        out.append((message["headers"]["task"], args))
    return out


def wait_for_messages(queued, count, timeout=5.0):
    deadline = time.monotonic() + timeout
    while broker().llen("celery") < queued + count and time.monotonic() < deadline:
        time.sleep(0.01)
    return messages_since(queued)


def commit(django_capture_on_commit_callbacks, runs, *keys):
    with django_capture_on_commit_callbacks(execute=True):
        return [job.pk for job in jobs.enqueue_many([JobSpec("tests.record", {"runs": runs.key}, key=k) for k in keys])]


@override_settings(JOBS_DISPATCH_LINGER_MS=300)
def test_transactions_committed_within_the_linger_share_one_message_in_order(django_capture_on_commit_callbacks, runs):
    queued = broker().llen("celery")
    first = commit(django_capture_on_commit_callbacks, runs, "share:1", "share:2")
    second = commit(django_capture_on_commit_callbacks, runs, "share:3")
    assert broker().llen("celery") == queued, "the committing thread does not publish"
    assert wait_for_messages(queued, 1) == [("jobs.run_many", [first + second])]
    time.sleep(0.4)
    assert broker().llen("celery") == queued + 1, "each job is sent once"


@override_settings(JOBS_DISPATCH_LINGER_MS=300, JOBS_DISPATCH_MAX_BATCH=3)
def test_a_message_holds_at_most_the_batch_size_and_never_splits_a_transaction(
    django_capture_on_commit_callbacks, runs
):
    queued = broker().llen("celery")
    a = commit(django_capture_on_commit_callbacks, runs, "cap:1", "cap:2")
    b = commit(django_capture_on_commit_callbacks, runs, "cap:3", "cap:4")
    c = commit(django_capture_on_commit_callbacks, runs, "cap:5", "cap:6", "cap:7", "cap:8")
    d = commit(django_capture_on_commit_callbacks, runs, "cap:9")
    assert wait_for_messages(queued, 4) == [
        ("jobs.run_many", [a]),
        ("jobs.run_many", [b]),
        ("jobs.run_many", [c]),  # larger than a batch on its own: kept whole
        ("jobs.run", d),
    ]


@override_settings(JOBS_DISPATCH_LINGER_MS=0)
def test_without_a_linger_the_message_goes_at_commit(django_capture_on_commit_callbacks, runs):
    queued = broker().llen("celery")
    [job_id] = commit(django_capture_on_commit_callbacks, runs, "at-commit")
    assert messages_since(queued) == [("jobs.run", [job_id])]


def test_flush_sends_what_is_pending_at_once(django_capture_on_commit_callbacks, runs):
    queued = broker().llen("celery")
    with override_settings(JOBS_DISPATCH_LINGER_MS=60_000):
        [job_id] = commit(django_capture_on_commit_callbacks, runs, "flushed")
        run_messages.flush()  # as at interpreter exit
        assert messages_since(queued) == [("jobs.run", [job_id])]


@override_settings(JOBS_DISPATCH_LINGER_MS=2, JOBS_DISPATCH_MAX_BATCH=50)
def test_many_threads_committing_at_once_each_get_their_jobs_sent_once():
    sent, lock = [], threading.Lock()

    def send(messages):
        with lock:
            sent.extend(messages)

    batcher = RunMessageBatcher(send)  # a fresh one: its first use races between the threads
    start = threading.Barrier(16)

    def commit_many(thread):
        start.wait()
        for n in range(100):
            batcher.submit([thread * 1000 + n * 2, thread * 1000 + n * 2 + 1])

    threads = [threading.Thread(target=commit_many, args=(t,)) for t in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    batcher.flush()
    ids = [job_id for message in sent for job_id in message]
    assert sorted(ids) == sorted(t * 1000 + k for t in range(16) for k in range(200)), "each job sent exactly once"
    assert all(len(message) <= 50 for message in sent)
    assert len(sent) < 1600, "transactions shared messages"
    for message in sent:  # a transaction's two jobs stay together and in order
        assert all(message[i + 1] == message[i] + 1 for i in range(0, len(message), 2))


@override_settings(JOBS_DISPATCH_LINGER_MS=2)
def test_a_forked_child_sends_its_own_jobs_and_not_its_parents():
    reader, writer = os.pipe()
    batcher = RunMessageBatcher(lambda messages: os.write(writer, json.dumps(messages).encode() + b"\n"))
    batcher.submit([1])  # the parent's publisher thread exists before the fork
    batcher.flush()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        try:
            batcher.submit([2])
            time.sleep(0.2)  # the child's own publisher thread sends it
        finally:
            os._exit(0)
    os.waitpid(child, 0)
    os.close(writer)
    with os.fdopen(reader) as lines:
        assert [json.loads(line) for line in lines] == [[[1]], [[2]]]


@override_settings(JOBS_DISPATCH_LINGER_MS=60_000)
def test_kinds_registered_unbatched_get_a_message_each_at_commit(django_capture_on_commit_callbacks, runs):
    """Sync shards and mailbox polls: side by side on separate worker processes, not one after another."""
    queued = broker().llen("celery")
    with django_capture_on_commit_callbacks(execute=True):
        shards = [jobs.enqueue("tests.record_alone", {"runs": runs.key}, key=f"alone:{n}") for n in range(2)]
        [short] = jobs.enqueue_many([JobSpec("tests.record", {"runs": runs.key}, key="beside-them")])
    assert messages_since(queued) == [("jobs.run", [shards[0].pk]), ("jobs.run", [shards[1].pk])]
    run_messages.flush()
    assert messages_since(queued)[2:] == [("jobs.run", [short.pk])], "the short one still waits for its batch"


def test_messages_whose_pipelined_send_fails_go_again_one_by_one(django_capture_on_commit_callbacks, runs, monkeypatch):
    """kombu does not retry a pipelined send: each message is sent alone then, with Celery's retry policy."""
    from kombu import Producer

    class FailingBatch:
        def __enter__(self):
            return self

        def __exit__(self, *exc_info):
            raise ConnectionError("the pipeline's round trip failed")

    monkeypatch.setattr(Producer, "batch", lambda self, *args, **kwargs: FailingBatch())
    queued = broker().llen("celery")
    with override_settings(JOBS_DISPATCH_LINGER_MS=60_000, JOBS_DISPATCH_MAX_BATCH=1):
        first = commit(django_capture_on_commit_callbacks, runs, "pipeline:1")
        second = commit(django_capture_on_commit_callbacks, runs, "pipeline:2")
        run_messages.flush()
    sent = messages_since(queued)
    assert ("jobs.run", first) in sent and ("jobs.run", second) in sent
