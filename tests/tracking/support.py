"""Helpers for email lead tracking tests: IMAP flags, job runs (lead emails are standins.lead_emails)."""

import threading

from django.db import connection

from standins.lead_emails import imap_session


def seen_flags(server, username, password) -> dict[int, bool]:
    """UID → whether the message is marked \\Seen."""
    with imap_session(server, username, password) as client:
        flags = client.get_flags(client.search(["ALL"]))
    return {uid: b"\\Seen" in value for uid, value in flags.items()}


def run_jobs(kind: str, *, make_due: bool = True) -> int:
    """Run every pending job of `kind` once, in this process; returns how many ran."""
    from django.utils import timezone

    import jobs
    from jobs.models import Job

    pending = Job.objects.filter(kind=kind, status=Job.Status.PENDING)
    if make_due:
        pending.update(run_after=timezone.now())
    ran = 0
    for job_id in pending.values_list("pk", flat=True):
        ran += jobs.run_now(job_id)
    return ran


def at_once(call, *, times: int = 4) -> tuple[list, list]:
    """`call()` from `times` threads released together: (their results, the exceptions they raised)."""
    barrier, results, errors = threading.Barrier(times), [], []

    def run():
        try:
            barrier.wait()
            results.append(call())
        except Exception as exc:  # collected for the caller's assertion
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run) for _ in range(times)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results, errors
