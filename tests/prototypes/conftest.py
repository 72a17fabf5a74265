import pytest
from django.core.cache import cache
from django.db.models import Q
from django.utils import timezone

from jobs import runtime as job_runtime
from jobs.models import Job
from leadgen.models import Lead
from leadgen.rules import Classification
from leadgen.services import lead_create
from standins.v0 import V0, Behaviour


@pytest.fixture(autouse=True)
def empty_cache():
    """Rate-limit holds, quota and relay leases live in the shared cache."""
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def fake_v0(settings):
    server = V0(Behaviour()).start()
    settings.V0_API_URL = server.url
    settings.V0_API_KEY = server.behaviour.api_key
    yield server
    server.stop()


def make_lead(**fields) -> Lead:
    """A diagnostic lead as the intake saves it (hold taken by the caller when it matters)."""
    values = {
        "first_name": "Ada",
        "last_name": "Lovelace",
        "email": "ada@analytical.example",
        "company": "Analytical Engines",
        "message": "Our monthly reporting takes two days of copy and paste.",
        "service_type": "diagnostic",
        "steps": {"Areas to look at": ["Finance & reporting"], "Company size": "11–50 people"},
    }
    values.update(fields)
    client_ip = values.pop("client_ip", "192.0.2.10")
    return lead_create(
        fields=values, client_ip=client_ip, classification=Classification("lead", 0.9, "test", Lead.Classifier.RULES)
    )


def run_jobs(*kind_prefixes: str, limit: int = 50) -> int:
    """Run the pending jobs of these kinds now, in order, as a worker would (delays ignored)."""
    kinds = Q()
    for prefix in kind_prefixes:
        kinds |= Q(kind__startswith=prefix)
    runs = 0
    while runs < limit and (job := Job.objects.filter(kinds, status=Job.Status.PENDING).order_by("pk").first()):
        Job.objects.filter(pk=job.pk).update(run_after=timezone.now())
        job_runtime.job_run(job_id=job.pk)
        runs += 1
    return runs


def run_next_check() -> Job:
    """Run the pending checks now (normally one: the processor's next), oldest first; returns the last as it ended."""
    pending = list(Job.objects.filter(status=Job.Status.PENDING, kind="prototypes.check").order_by("pk"))
    assert pending, "no check is scheduled"
    for job in pending:
        Job.objects.filter(pk=job.pk).update(run_after=timezone.now())
        job_runtime.job_run(job_id=job.pk)
        job.refresh_from_db()
    return pending[-1]
