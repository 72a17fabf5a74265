"""Run messages for newly committed jobs, sent in batches by one publisher thread per process.

Sending each transaction's run message on the committing thread cost every
enqueue a whole Celery publish, and every job a whole Celery task in the
worker; bench/jobs measured durable jobs at 0.43–0.47 of bare Celery's rate
that way. Here the committing thread only hands the job ids over. The
publisher thread waits JOBS_DISPATCH_LINGER_MS for more, then sends what came
as `jobs.run_many` messages of at most JOBS_DISPATCH_MAX_BATCH jobs (a single
job as `jobs.run`). The ids of one transaction stay together and in order.

Nothing is lost if the process dies before the thread sends: the jobs are
committed with `dispatched_at` set, and the sweep sends them again after
REDISPATCH_AFTER. Pending ids are also sent at interpreter exit, so a
management command's jobs do not wait for the sweep. With a linger of 0 the
message goes out on the committing thread, as a plain after-commit publish.

Written here because Celery has no publish-side batching: celery-batches
groups messages in the worker, after each was published on its own.
"""

import atexit
import os
import threading
import time
from collections.abc import Callable, Sequence

import structlog
from django.conf import settings

logger = structlog.get_logger(__name__)


class RunMessageBatcher:
    def __init__(self, send: Callable[[list[int]], None]):
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
            self._send(list(job_ids))
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
        message = []
        for job_ids in pending:
            if message and len(message) + len(job_ids) > settings.JOBS_DISPATCH_MAX_BATCH:
                self._send(message)
                message = []
            message += job_ids
        if message:
            self._send(message)

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
