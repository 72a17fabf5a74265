"""A retry after a call that succeeded upstream creates nothing twice.

The fake upstream applies the request; the fault proxy in front of it then
resets the connection or withholds the answer until our client times out.
The job is retried (and, for a worker that died after the side effect,
reclaimed by the sweep and run again); each fake then holds exactly one record.
"""

from datetime import timedelta

import pytest
from django.utils import timezone

import jobs
from jobs import runtime
from jobs.models import Job
from jobs.registry import get_handler
from leadgen.rules import Classification
from leadgen.services import lead_create
from tests.reliability.conftest import ScriptedFaults

pytestmark = pytest.mark.django_db


def make_lead(**fields):
    defaults = {
        "first_name": "Ada",
        "last_name": "Lovelace",
        "email": "ada@analytical.example",
        "phone": "+14155550100",
        "company": "Acme",
        "message": "We need help with our quoting process.",
        "service_type": "diagnostic",
    }
    return lead_create(
        fields={**defaults, **fields},
        client_ip="203.0.113.7",
        classification=Classification("lead", 0.9, "Real need.", "llm"),
    )


def drain():
    """Run every pending job now, as the workers would once each backoff passed."""
    while job := Job.objects.filter(status=Job.Status.PENDING).order_by("pk").first():
        Job.objects.filter(pk=job.pk).update(run_after=timezone.now())
        jobs.run_now(job.pk)


def assert_one_of_each(upstreams):
    assert (len(upstreams.pipedrive.persons), len(upstreams.pipedrive.organizations)) == (1, 1)
    assert len(upstreams.pipedrive.leads) == 1, "one Pipedrive lead"
    assert len(upstreams.pipedrive.notes) == 1, "one note on it"
    assert len(upstreams.clickup.tasks) == 1, "one sales alert"
    assert len(upstreams.mailgun.messages) == 1, "one confirmation email"
    # The lead's own side effects; a diagnostic lead also starts a prototype, which is off here (skipped).
    assert set(Job.objects.filter(kind__startswith="leadgen.").values_list("status", flat=True)) == {"succeeded"}


@pytest.mark.parametrize("fault", ["reset_after", "timeout"])
@pytest.mark.parametrize(
    ("service", "request_line"),
    [
        ("pipedrive", "POST /v1/persons "),
        ("pipedrive", "POST /v1/organizations "),
        ("pipedrive", "POST /v1/leads "),
        ("pipedrive", "POST /v1/notes "),
        ("clickup", "POST /api/v2/list/901/task "),
        ("mailgun", "POST /v3/mg.example.com/messages "),
    ],
)
def test_a_create_applied_upstream_whose_answer_is_lost_is_not_repeated(upstreams, service, request_line, fault):
    upstreams.aim(service, ScriptedFaults({request_line: [fault]}))
    lead = make_lead()
    drain()
    assert upstreams.proxies[service].stats[fault] == 1, "the fault was injected"
    assert_one_of_each(upstreams)
    lead.refresh_from_db()
    assert lead.pipedrive_lead_id == upstreams.pipedrive.leads[0]["id"]
    assert lead.clickup_task_id == upstreams.clickup.tasks[0]["id"]


@pytest.mark.parametrize("kind", ["leadgen.confirmation_email", "leadgen.lead_alert", "leadgen.pipedrive_note"])
def test_a_worker_that_dies_after_the_side_effect_does_not_repeat_it(upstreams, kind):
    """The handler did its work, then the worker died before recording the finish: the sweep
    reclaims the job after its lease and another run finds the work done."""
    make_lead()
    drain_except = Job.objects.exclude(kind=kind).filter(kind__in=["leadgen.pipedrive_sync"])
    for job in drain_except:
        jobs.run_now(job.pk)  # the note needs the Pipedrive lead
    job = Job.objects.get(kind=kind)
    Job.objects.filter(pk=job.pk).update(run_after=timezone.now())
    claimed = runtime.job_claim(job_id=job.pk)
    get_handler(kind)(claimed)  # the side effect happens; no finish is recorded (the worker died)
    Job.objects.filter(pk=job.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert runtime.jobs_sweep()["reclaimed"] == 1
    drain()
    assert_one_of_each(upstreams)
    assert Job.objects.get(pk=job.pk).attempts == 2


def test_every_email_of_a_job_carries_the_same_message_id(upstreams):
    upstreams.aim("mailgun", ScriptedFaults({"POST /v3/mg.example.com/messages ": ["http_503"]}))
    lead = make_lead()
    drain()
    assert upstreams.proxies["mailgun"].stats["http_503"] == 1
    [message] = upstreams.mailgun.messages
    key = lead.job_key("leadgen.confirmation_email")
    from integrations.mail import stable_message_id

    assert message["message_id"] == stable_message_id(key)
    assert message["message_id"].endswith("@mg.example.com>")


@pytest.fixture
def finishing_v0(settings):
    """V0 whose generations are final at once (the prototype tests' fake), not faulted: the prototype completes."""
    from standins.v0 import V0, Behaviour

    server = V0(Behaviour(auto_finish=True)).start()
    settings.V0_API_URL, settings.V0_API_KEY = server.url, server.behaviour.api_key
    yield server
    server.stop()


def drain_kinds(prefix):
    while job := Job.objects.filter(status=Job.Status.PENDING, kind__startswith=prefix).order_by("pk").first():
        Job.objects.filter(pk=job.pk).update(run_after=timezone.now())
        jobs.run_now(job.pk)


@pytest.mark.parametrize("fault", ["reset_after", "timeout"])
@pytest.mark.parametrize(
    ("service", "request_line"),
    [
        ("pipedrive", "POST /v1/notes "),
        ("clickup", "POST /api/v2/list/901/task "),
        ("mailgun", "POST /v3/mg.example.com/messages "),
    ],
)
def test_a_prototype_ready_message_applied_upstream_whose_answer_is_lost_is_not_repeated(
    upstreams, finishing_v0, service, request_line, fault
):
    """Once a prototype completes, sales get one task, the Pipedrive lead one note and the visitor one email,
    however the answers to those calls are lost."""
    make_lead()
    drain_kinds("leadgen.")  # the lead's own note, alert and email first, unfaulted
    upstreams.aim(service, ScriptedFaults({request_line: [fault]}))
    drain()
    assert upstreams.proxies[service].stats[fault] == 1, "the fault was injected"
    assert set(Job.objects.values_list("status", flat=True)) == {"succeeded"}
    assert [task["name"].split(":")[0] for task in upstreams.clickup.tasks][1:] == ["Prototype ready"]
    assert len(upstreams.pipedrive.notes) == 2, "the lead's note and the prototype's"
    assert [m["subject"] for m in upstreams.mailgun.messages][1:] == ["Your prototype is ready"]
    assert (upstreams.pipedrive.duplicates(), upstreams.clickup.duplicates(), upstreams.mailgun.duplicates()) == (
        0,
        0,
        0,
    )
