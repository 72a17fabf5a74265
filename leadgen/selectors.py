from chat.models import ChatSession
from jobs.models import Job
from jobs.registry import registered_kinds
from leadgen.models import Lead


def lead_latest_for_email(*, email: str) -> Lead | None:
    return Lead.objects.filter(email__iexact=email.strip()).order_by("-created_at").first()


def chat_session_ip(*, session_id: str) -> str | None:
    return ChatSession.objects.filter(session_id=session_id).values_list("client_ip", flat=True).first()


def lead_jobs(*, lead: Lead):
    """Every job a lead set off: one per leadgen kind (Lead.job_key), read through the key's index."""
    keys = [lead.job_key(kind) for kind in registered_kinds() if kind.startswith("leadgen.")]
    return Job.objects.filter(key__in=keys).order_by("created_at")
