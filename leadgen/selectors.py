from django.db.models import Count, Q
from django.db.models.functions import TruncDate

import jobs
from leadgen.models import Lead
from leadgen.routing import is_prototype_eligible

LeadNotFound = Lead.DoesNotExist


def service_type_choices() -> list[tuple[str, str]]:
    """The service types a lead may have, as (value, label)."""
    return Lead.ServiceType.choices


def channel_choices() -> list[tuple[str, str]]:
    """The channels a lead may come through, as (value, label)."""
    return Lead.Channel.choices


def lead_get(*, lead_id: int) -> Lead:
    return Lead.objects.get(pk=lead_id)


def lead_latest_for_email(*, email: str) -> Lead | None:
    return Lead.objects.filter(email__iexact=email.strip()).order_by("-created_at").first()


def lead_jobs(*, lead: Lead):
    """Every job a lead set off: one per leadgen kind (Lead.job_key), read through the key's index."""
    return jobs.jobs_with_keys(lead.job_key(kind) for kind in jobs.registered_kinds() if kind.startswith("leadgen."))


def leads_for_processing(*, lead_ids, fields, store_fields) -> dict[int, Lead]:
    """These leads (those that exist) by id, with only `fields` and their stores' `store_fields`."""
    leads = Lead.objects.select_related("store").only(*fields, *(f"store__{name}" for name in store_fields))
    return {lead.pk: lead for lead in leads.filter(pk__in=lead_ids)}


def email_leads_complete_since(*, since):
    """Email leads understood by the parser, with a phone or an email, received since `since`, by id."""
    return (
        Lead.objects.filter(channel=Lead.Channel.EMAIL, parse_state=Lead.ParseState.PARSED, received_at__gte=since)
        .exclude(phone="", email="")
        .order_by("pk")
    )


def lead_gets_prototype(*, lead: Lead) -> bool:
    """Whether intake opens an AI prototype for this lead: a real lead for a prototype-eligible service."""
    return lead.status == Lead.Status.LEAD and is_prototype_eligible(lead.service_type)


def lead_prototype(*, lead: Lead):
    """The lead's AI prototype, if it has one (the relation prototypes.Prototype.lead)."""
    return getattr(lead, "prototype", None)


# --- back-office figures: `store_ids` None means every store ------------------------------------


def _leads_recorded(start, end, store_ids):
    # A platform's test leads are kept for checking a connection, not counted.
    leads = Lead.objects.filter(created_at__gte=start, created_at__lt=end, is_test=False)
    return leads if store_ids is None else leads.filter(store__in=store_ids)


def leads_per_day_counts(*, start, end, store_ids=None) -> list[dict]:
    """Leads recorded in [start, end) per day (site time zone), channel and status, with how many of each group
    were delivered to Pipedrive: {day, channel, status, count, delivered}. The funnel adds these up, so the
    dashboard reads the period's leads once."""
    rows = _leads_recorded(start, end, store_ids).annotate(day=TruncDate("created_at"))
    return list(
        rows.values("day", "channel", "status")
        .annotate(count=Count("pk"), delivered=Count("pk", filter=Q(pipedrive_state=Lead.PipedriveState.SYNCED)))
        .order_by()
    )


def leads_by_ids(*, lead_ids, store_id):
    """The leads behind a contact's timeline that belong to its store, newest first, with what its page shows."""
    fields = ("channel", "lead_type", "service_type", "steps", "message", "received_at", "created_at",
              "email_recipient", "source_page")  # fmt: skip
    return Lead.objects.filter(pk__in=lead_ids, store_id=store_id).only(*fields).order_by("-created_at")


# --- data-subject requests (privacy/) ------------------------------------------------------------


def subject_rows(*, emails, phones) -> dict[str, list[dict]]:
    """Every lead naming the person, whole: by email (any case), by phone (E.164), and the email leads kept
    unparsed whose body holds one of the emails. {model label: rows}."""
    match = Q(phone__in=phones) if phones else Q(pk__in=[])
    for email in emails:
        match |= Q(email__iexact=email)
        match |= Q(channel=Lead.Channel.EMAIL, parse_state=Lead.ParseState.FAILED, raw_body__icontains=email)
    return {Lead._meta.label: list(Lead.objects.filter(match).order_by("pk").values())}
