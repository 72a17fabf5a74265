"""What each service type means for the side effects of a lead: email, Pipedrive note, alert.

Texts live in templates (templates/emails/, templates/leadgen/) so sales can
edit wording without touching code; this table only says which is which.
"""

from dataclasses import dataclass

from django.conf import settings

from leadgen.models import Lead


@dataclass(frozen=True)
class ServiceRoute:
    label: str
    email_subject: str
    email_template: str  # templates/emails/<name>.html and .txt
    note_template: str  # templates/leadgen/notes/<name>.html
    alert_heading: str


ROUTES = {
    Lead.ServiceType.DIAGNOSTIC: ServiceRoute(
        label="Diagnostic",
        email_subject="Your diagnostic request: next steps",
        email_template="confirmation_diagnostic",
        note_template="diagnostic",
        alert_heading="New diagnostic lead",
    ),
    Lead.ServiceType.STRATEGIC_ADVICE: ServiceRoute(
        label="Strategic advice",
        email_subject="Your strategy session request",
        email_template="confirmation_strategic_advice",
        note_template="strategic_advice",
        alert_heading="New strategic-advice lead",
    ),
    Lead.ServiceType.DEDICATED_TEAM: ServiceRoute(
        label="Dedicated team",
        email_subject="Building your dedicated team",
        email_template="confirmation_dedicated_team",
        note_template="dedicated_team",
        alert_heading="New dedicated-team lead",
    ),
    Lead.ServiceType.TECHNOLOGY_STRATEGY: ServiceRoute(
        label="Technology strategy",
        email_subject="Your technology strategy request",
        email_template="confirmation_technology_strategy",
        note_template="technology_strategy",
        alert_heading="New technology-strategy lead",
    ),
    Lead.ServiceType.PROCESS_AUTOMATION: ServiceRoute(
        label="Process automation",
        email_subject="Automating your process: next steps",
        email_template="confirmation_process_automation",
        note_template="process_automation",
        alert_heading="New process-automation lead",
    ),
}

GENERAL_ROUTE = ServiceRoute(
    label="General enquiry",
    email_subject="Thanks for getting in touch",
    email_template="confirmation_general",
    note_template="general",
    alert_heading="New lead",
)


def route_for(service_type: str) -> ServiceRoute:
    return ROUTES.get(service_type, GENERAL_ROUTE)


def is_prototype_eligible(service_type: str) -> bool:
    return service_type in settings.LEADS_PROTOTYPE_SERVICE_TYPES
