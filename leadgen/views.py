"""The public lead form at `/`: a multi-step page whose script posts to POST /api/leads."""

from dataclasses import dataclass

from django.conf import settings
from django.shortcuts import render

from leadgen.consent import CONSENT_TEXT, CONSENT_VERSION
from leadgen.models import Lead
from leadgen.routing import route_for


@dataclass(frozen=True)
class Question:
    """A step-2 question. Its text is the key of the answer in `steps`, as sales read it in Pipedrive."""

    text: str
    choices: tuple[str, ...]
    multiple: bool = False


COMPANY_SIZE = Question("Company size", ("1–10 people", "11–50 people", "51–200 people", "More than 200 people"))
TIMELINE = Question(
    "When would you like to start?", ("As soon as possible", "Within 3 months", "In 3–6 months", "Just exploring")
)
BUDGET = Question("Budget", ("Under $10k", "$10k–$50k", "$50k–$150k", "Over $150k", "Not sure yet"))
CURRENT_TOOLS = Question(
    "Current tools",
    ("Spreadsheets", "CRM", "ERP", "Project management", "Custom software", "None yet"),
    multiple=True,
)

SERVICES = [
    (
        Lead.ServiceType.DIAGNOSTIC,
        "We review how your business runs today and show where to improve, with a working prototype.",
        [
            Question(
                "Areas to look at",
                ("Sales & marketing", "Operations", "Customer service", "Finance & reporting", "IT & systems"),
                multiple=True,
            ),
            COMPANY_SIZE,
            TIMELINE,
        ],
    ),
    (
        Lead.ServiceType.STRATEGIC_ADVICE,
        "Senior advisors help you set priorities and plan your next moves.",
        [
            Question(
                "Main challenge",
                ("Growing revenue", "Reducing costs", "Digital transformation", "Entering a new market", "Other"),
            ),
            COMPANY_SIZE,
            TIMELINE,
            BUDGET,
        ],
    ),
    (
        Lead.ServiceType.DEDICATED_TEAM,
        "Engineers, designers and analysts who work as part of your team.",
        [
            Question(
                "Roles needed",
                ("Backend", "Frontend", "Mobile", "Data & AI", "QA", "DevOps", "Product design"),
                multiple=True,
            ),
            Question("Team size", ("1–2 people", "3–5 people", "6–10 people", "More than 10 people")),
            TIMELINE,
            BUDGET,
        ],
    ),
    (
        Lead.ServiceType.TECHNOLOGY_STRATEGY,
        "Choose the right platforms, architecture and roadmap for the years ahead.",
        [
            Question(
                "Decisions ahead",
                ("Platform & architecture", "Build or buy", "Cloud migration", "Data & AI roadmap", "Security"),
                multiple=True,
            ),
            CURRENT_TOOLS,
            TIMELINE,
        ],
    ),
    (
        Lead.ServiceType.PROCESS_AUTOMATION,
        "Take manual, repetitive work out of your daily operations, with a working prototype.",
        [
            Question(
                "Processes to automate",
                ("Sales follow-up", "Quotes & invoicing", "Reporting", "Customer onboarding", "Orders & inventory"),
                multiple=True,
            ),
            CURRENT_TOOLS,
            Question("Hours a week spent on them", ("Under 5", "5–20", "20–40", "More than 40")),
            TIMELINE,
        ],
    ),
    ("", "Tell us what you have in mind and we will find the right people.", [TIMELINE, BUDGET]),
]


def lead_form(request):
    services = [
        {
            "value": value,
            "slug": value or "other",
            "label": route_for(value).label if value else "Something else",
            "description": description,
            "questions": questions,
        }
        for value, description, questions in SERVICES
    ]
    context = {
        "services": services,
        "recaptcha_site_key": settings.RECAPTCHA_SITE_KEY,
        "recaptcha_script_url": settings.RECAPTCHA_SCRIPT_URL,
        "recaptcha_action": settings.RECAPTCHA_ACTION,
        "consent_text": CONSENT_TEXT,
        "consent_version": CONSENT_VERSION,
    }
    return render(request, "leadgen/lead_form.html", context)
