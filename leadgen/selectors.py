from chat.models import ChatSession
from jobs.models import Job
from leadgen.models import Lead


def lead_latest_for_email(*, email: str) -> Lead | None:
    return Lead.objects.filter(email__iexact=email.strip()).order_by("-created_at").first()


def chat_session_ip(*, session_id: str) -> str | None:
    return ChatSession.objects.filter(session_id=session_id).values_list("client_ip", flat=True).first()


def lead_jobs(*, lead: Lead):
    """Every job a lead set off: their keys end with `:{lead id}` under the leadgen kinds."""
    return Job.objects.filter(kind__startswith="leadgen.", key__endswith=f":{lead.pk}").order_by("created_at")
