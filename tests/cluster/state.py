"""What the cluster's database holds at the end of a run, as JSON on stdout, read through the product's models.

    python -m tests.cluster.state        (with the cluster hosts' settings in the environment)

Run in a process of its own: the test process's Django is configured for the test database.
"""

import json
import os
from collections import Counter

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django  # noqa: E402

django.setup()

from chat.models import ChatMessage  # noqa: E402
from jobs.models import Job, JobAttempt  # noqa: E402
from leadgen.idempotency import IN_PROGRESS  # noqa: E402
from leadgen.models import IdempotentRequest, Lead  # noqa: E402
from prototypes.models import Prototype  # noqa: E402


def state() -> dict:
    messages: dict[str, list] = {}
    for session_id, role, message_state, content in ChatMessage.objects.order_by("id").values_list(
        "session__session_id", "role", "state", "content"
    ):
        messages.setdefault(session_id, []).append([role, message_state, content])
    return {
        "leads": list(Lead.objects.values_list("pk", "public_id", "email", "status", "company")),
        "jobs": dict(Counter(Job.objects.values_list("status", flat=True))),
        "dead": list(Job.objects.filter(status=Job.Status.DEAD).values_list("kind", "last_error")),
        "attempts": dict(Counter(JobAttempt.objects.values_list("outcome", flat=True))),
        "lost_by_kind": dict(
            Counter(JobAttempt.objects.filter(outcome=JobAttempt.Outcome.LOST).values_list("job__kind", flat=True))
        ),
        "prototypes": list(Prototype.objects.values_list("lead__public_id", "state")),
        "chat": messages,
        "keys_in_progress": IdempotentRequest.objects.filter(response_status=IN_PROGRESS).count(),
        # The jobs that finished last: what the drain waited for (beat's own jobs among them).
        "last_jobs": [
            [kind, attempts, created.timestamp(), finished.timestamp()]
            for kind, attempts, created, finished in Job.objects.exclude(finished_at=None)
            .order_by("-finished_at")
            .values_list("kind", "attempts", "created_at", "finished_at")[:20]
        ],
    }


if __name__ == "__main__":
    print(json.dumps(state(), default=str))
