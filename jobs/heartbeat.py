"""Lease renewal while handlers run: one thread per worker process extends the leases of its running jobs.

A job is registered when its handler starts and removed when it returns.
Every JOBS_HEARTBEAT_SECONDS the thread extends, in one UPDATE, the leases of
the jobs registered for at least that long, fenced on (id, attempt number,
running): a job whose lease was taken away (the sweep reclaimed it, another
attempt claimed it) is not extended again, and its finish is refused by the
same fence in runtime.job_finish. Short jobs, the common case, cost nothing
here: they are gone before the first beat. The thread keeps its own database
connection; a failed beat (database down) is logged and tried again next time,
and a lease that ran out meanwhile is the sweep's to reclaim.
"""

import os
import threading
import time
from dataclasses import dataclass, field
from datetime import timedelta

import structlog
from django.conf import settings
from django.db import connection
from django.utils import timezone

from foundation.db import describe_db_error
from jobs.models import Job

logger = structlog.get_logger(__name__)


@dataclass
class Running:
    job_id: int
    attempt: int
    since: float = field(default_factory=time.monotonic)
    lost: bool = False


class LeaseHeartbeat:
    def __init__(self):
        self._pid = None
        self._starting = threading.Lock()
        os.register_at_fork(after_in_child=self._forget_the_parent)

    def _forget_the_parent(self):
        self._pid = None
        self._starting = threading.Lock()

    def register(self, job) -> Running:
        self._start_in_this_process()
        running = Running(job.pk, job.attempts)
        with self._lock:
            self._running[(job.pk, job.attempts)] = running
        return running

    def unregister(self, running: Running) -> None:
        with self._lock:
            self._running.pop((running.job_id, running.attempt), None)

    def beat(self) -> None:
        """Extend the due leases once (the thread's loop body; tests call it directly too)."""
        interval = settings.JOBS_HEARTBEAT_SECONDS
        now = time.monotonic()
        with self._lock:
            due = [running for running in self._running.values() if now - running.since >= interval]
        if not due:
            return
        expires = timezone.now() + timedelta(seconds=settings.JOBS_LEASE_SECONDS)
        extended = set()
        for running in due:  # a handful at most: one per job running in this process
            if Job.objects.filter(pk=running.job_id, attempts=running.attempt, status=Job.Status.RUNNING).update(
                lease_expires_at=expires
            ):
                extended.add(running.job_id)
        for running in due:
            running.since = now
            if running.job_id not in extended:
                running.lost = True
                self.unregister(running)
                logger.warning("job_lease_lost", job_id=running.job_id, attempt=running.attempt)

    def _start_in_this_process(self):
        if self._pid == os.getpid():
            return
        with self._starting:
            if self._pid == os.getpid():
                return
            self._lock = threading.Lock()
            self._running: dict[tuple[int, int], Running] = {}
            threading.Thread(target=self._beat_forever, name="jobs-heartbeat", daemon=True).start()
            self._pid = os.getpid()

    def _beat_forever(self):
        while True:
            # At least once a second: a check of the registry, no database work unless a beat is due.
            time.sleep(min(max(settings.JOBS_HEARTBEAT_SECONDS / 4, 0.05), 1.0))
            try:
                self.beat()
            except Exception as exc:  # the thread must survive a database outage
                logger.warning("job_heartbeat_failed", error=describe_db_error(exc))
            finally:
                # This thread's own connection: beats are rare, so none is held between them (and a
                # broken one is not reused).
                connection.close()


lease_heartbeat = LeaseHeartbeat()
