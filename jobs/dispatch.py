"""Run messages for newly committed jobs, sent in batches by one publisher thread per process.

The committing thread only hands the job ids over, so an enqueue never pays
for a Celery publish and a worker runs several jobs per Celery task (bench/jobs
measures the difference). The publisher thread waits JOBS_DISPATCH_LINGER_MS
for more, then sends what came as `jobs.run_many` messages of at most
JOBS_DISPATCH_MAX_BATCH jobs (a single job as `jobs.run`). The ids of one
transaction stay together and in order.

Nothing is lost if the process dies before the thread sends: the jobs are
committed with `dispatched_at` set, and the sweep sends them again after
JOBS_REDISPATCH_SECONDS. Pending ids are also sent at interpreter exit, so a
management command's jobs do not wait for the sweep. With a linger of 0 the
message goes out on the committing thread, as a plain after-commit publish.

Messages are published by task name, so this module needs nothing from
jobs/tasks.py. Written here because Celery cannot put several tasks in one
message: celery-batches groups messages in the worker, after each was published
on its own. The messages of one send share a producer and one round trip to
the broker (kombu's Producer.batch).
"""

import atexit
import os
import threading
import time
from collections.abc import Callable, Sequence

import structlog
from celery import current_app
from django.conf import settings

from jobs.kinds import RUN_MANY_TASK, RUN_TASK

logger = structlog.get_logger(__name__)


class RunMessageBatcher:
    def __init__(self, send: Callable[[list[list[int]]], None]):
        """`send(messages)`: publish each list of job ids as one run message."""
        self._send = send
        self._forget_the_parent()
        # A child forked while another thread held the lock would inherit it held.
        os.register_at_fork(after_in_child=self._forget_the_parent)

    def _forget_the_parent(self):
        self._pid = None  # the state and thread below belong to the process with this pid
        self._starting = threading.Lock()

    def submit(self, job_ids: Sequence[int]) -> None:
        """Hand over the due jobs of one committed transaction."""
        linger = settings.JOBS_DISPATCH_LINGER_MS / 1000
        if linger <= 0:
            self._send([list(job_ids)])
            return
        self._start_in_this_process()
        with self._changed:
            if not self._pending:
                self._send_at = time.monotonic() + linger
            self._pending.append(list(job_ids))
            self._changed.notify()

    def flush(self) -> None:
        """Send everything handed over so far, now, on the calling thread."""
        if self._pid != os.getpid():
            return  # nothing was handed over in this process (a forked child starts empty)
        with self._changed:
            pending, self._pending = self._pending, []
            self._changed.notify()
        self._send_batched(pending)

    def _send_batched(self, pending: list[list[int]]):
        """The pending transactions' ids as messages of at most JOBS_DISPATCH_MAX_BATCH, sent together."""
        messages = [[]]
        for job_ids in pending:
            if messages[-1] and len(messages[-1]) + len(job_ids) > settings.JOBS_DISPATCH_MAX_BATCH:
                messages.append([])
            messages[-1] += job_ids
        if messages[-1]:
            self._send(messages)

    def _start_in_this_process(self):
        if self._pid == os.getpid():
            return
        with self._starting:  # request threads may commit their first jobs at the same moment
            if self._pid == os.getpid():
                return
            self._changed = threading.Condition()
            self._pending: list[list[int]] = []
            self._send_at = 0.0
            threading.Thread(target=self._publish_forever, name="jobs-dispatch", daemon=True).start()
            atexit.register(self.flush)
            self._pid = os.getpid()  # last: another thread that sees it finds the state ready

    def _publish_forever(self):
        while True:
            with self._changed:
                while not self._pending:
                    self._changed.wait()
                # Linger from the oldest pending transaction's commit; a flush meanwhile empties the list.
                while self._pending and (wait := self._send_at - time.monotonic()) > 0:
                    self._changed.wait(wait)
                pending, self._pending = self._pending, []
            try:
                self._send_batched(pending)
            except Exception:  # the thread must survive; the sweep re-sends what was not sent
                logger.exception("job_dispatch_batch_failed")


def send_run_messages(job_ids) -> None:
    """One run message per job: for the sweep and replays, whose jobs any free worker may take."""
    _publish([[job_id] for job_id in job_ids])


def _publish(messages: list[list[int]]) -> None:
    """Each list of due job ids as one run message: a single job as `jobs.run`, several as `jobs.run_many`,
    which one worker runs in order (runtime.jobs_run).

    One producer from Celery's pool for them all, and when there are several, one pipelined
    round trip to the broker (kombu's Producer.batch): a publish otherwise pays for the pool
    checkout and a Redis client of its own. A pipelined send is not retried, so if it fails,
    each message goes again alone with Celery's retry policy (one sent twice is harmless: the
    claim is conditional). `argsrepr` is given, so Celery does not build its safe repr of the
    ids. If one job of a message holds its worker up, the sweep sends the others again after
    JOBS_REDISPATCH_SECONDS, and whichever worker claims a job first runs it.
    """
    if not messages:
        return
    if len(messages) > 1:
        try:
            with current_app.producer_or_acquire() as producer, producer.batch():
                for job_ids in messages:
                    _send(producer, job_ids)
            return
        except Exception as exc:
            logger.info("job_dispatch_pipeline_failed", messages=len(messages), error=type(exc).__name__)
    try:
        with current_app.producer_or_acquire() as producer:
            for job_ids in messages:
                try:
                    _send(producer, job_ids)
                except Exception as exc:  # broker down: the sweep sends it again later
                    logger.warning("job_dispatch_failed", job_ids=job_ids, error=type(exc).__name__)
    except Exception as exc:  # no producer: the sweep sends them all again later
        job_ids = [job_id for message in messages for job_id in message]
        logger.warning("job_dispatch_failed", job_ids=job_ids, error=type(exc).__name__)


def _send(producer, job_ids: list[int]) -> None:
    task, args = (RUN_TASK, [job_ids[0]]) if len(job_ids) == 1 else (RUN_MANY_TASK, [list(job_ids)])
    current_app.send_task(task, args=args, argsrepr=repr(args), producer=producer)


# Due jobs of committed transactions go to the workers through this, batched.
run_messages = RunMessageBatcher(_publish)


def dispatch_committed(batched, unbatched) -> None:
    """After commit: batched kinds through the publisher thread, the others a message each, now."""
    if batched:
        run_messages.submit(batched)
    send_run_messages(unbatched)
