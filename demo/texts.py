"""What the demo office's people wrote and what their platforms sent: form messages and answers, chat turns,
lead-notification emails, the inbound platforms' request bodies. Plain functions of their arguments.
"""

import json
from datetime import date, datetime, time
from email.message import EmailMessage
from email.utils import format_datetime

SERVICE_LABELS = {
    "diagnostic": "diagnostic", "strategic_advice": "strategic advice", "dedicated_team": "dedicated team",
    "technology_strategy": "technology strategy", "process_automation": "process automation", "": "general",
}  # fmt: skip

MESSAGES = {
    "diagnostic": [
        "Our sales pipeline at {company} has stalled this quarter and we can't tell why. Could you run a diagnostic?",
        "We'd like an outside look at how {company} handles inbound leads: response times are all over the place.",
        "Looking for a quick diagnostic of our ops before we hire {n} more people.",
    ],
    "process_automation": [
        "We re-key every order from email into our ERP by hand. Can this be automated for {company}?",
        "Our invoicing takes {n} people two days a month. We want it automated end to end.",
        "Quote-to-cash at {company} is spreadsheets and email. What would automating it look like?",
    ],
    "strategic_advice": [
        "{company} is entering a new market next year and we'd value a strategy session.",
        "We're weighing build vs. buy for our customer portal and want an independent view.",
    ],
    "technology_strategy": [
        "Our stack has grown to {n} tools that don't talk to each other. We need a technology roadmap.",
        "{company} is planning a move off our legacy CRM; looking for help choosing what comes next.",
    ],
    "dedicated_team": [
        "We need a team of {n} engineers for about six months to build our booking platform.",
        "{company} is looking for a dedicated team to take over maintenance of our mobile app.",
    ],
    "": [
        "Could someone call me back about what you offer for a company our size?",
        "Saw your talk last month. Would love to chat about working together.",
    ],
}
SPAM_MESSAGES = [
    "Best casino bonus today!!! http://bonus.example.net http://spins.example.net http://win.example.net",
    "Crypto giveaway: double your coins now http://coins.example.net http://giveaway.example.net http://x.example.net",
]
VENDOR_MESSAGES = [
    "Hi, we are a leading SEO agency. We can get {company} to rank on the first page with our link building.",
    "Partnership opportunity: hire dedicated developers from our offshore team at a fraction of the cost.",
    "Our agency offers white-label web design services. Can I send you our portfolio?",
]
LLM_REASONING = {
    "lead": "A specific business need from a named company; no sales pitch or spam signal.",
    "spam": "Link-stuffed promotional text unrelated to our services.",
    "vendor": "The sender is offering their own services rather than asking for ours.",
}

STEPS = {
    "diagnostic": {"Team size": ["1-10", "11-50", "51-200"], "Where it hurts": ["Lead response", "Forecasting",
                   "Handoffs between teams"], "Timeline": ["This month", "This quarter"]},
    "process_automation": {"Process": ["Invoicing", "Order entry", "Onboarding", "Reporting"],
                           "Hours per week": ["5-10", "10-20", "20+"], "Systems": ["Excel, email", "ERP, email",
                           "CRM, spreadsheets"]},
    "strategic_advice": {"Topic": ["New market", "Pricing", "Build vs. buy"], "Timeline": ["This quarter",
                         "Next 6 months"]},
    "technology_strategy": {"Current stack": ["Legacy CRM", "Many SaaS tools", "In-house system"],
                            "Budget": ["$10k-$25k", "$25k-$100k", "$100k+"]},
    "dedicated_team": {"Team size": ["2-3", "4-6", "7+"], "Duration": ["3 months", "6 months", "12 months"],
                       "Skills": ["Python, React", "Mobile", "Data engineering"]},
}  # fmt: skip

SOURCE_PAGES = {
    "diagnostic": "https://example.com/services/diagnostic", "process_automation": "https://example.com/automation",
    "strategic_advice": "https://example.com/services/strategy", "dedicated_team": "https://example.com/teams",
    "technology_strategy": "https://example.com/services/technology", "": "https://example.com/contact",
}  # fmt: skip
UTMS = [
    {}, {},
    {"source": "google", "medium": "cpc", "campaign": "brand-search"},
    {"source": "linkedin", "medium": "social", "campaign": "automation-guide"},
    {"source": "newsletter", "medium": "email", "campaign": "monthly-digest"},
]  # fmt: skip

PROTOTYPE_TITLES = {
    "diagnostic": "Sales pipeline health dashboard for {company}",
    "process_automation": "Order-to-invoice automation portal for {company}",
}
PROTOTYPE_STEPS = ["Reading your brief", "Planning the pages", "Building the layout", "Wiring up sample data",
                   "Polishing the design"]  # fmt: skip

CHAT_OPENERS = [
    "Hi, do you help companies like ours with {label}?",
    "Hello! I have a question about your {label} offer.",
    "Hey, what does a {label} engagement usually look like?",
]
CHAT_ONLY = [
    ("How much does a diagnostic cost?", "It depends on the size of the team: most diagnostics take one to two weeks. "
     "Would you like someone to send you a proposal?", "Not yet, just comparing options. Thanks!"),
    ("Do you work with companies outside the US?", "Yes, we work with teams across North America and Europe.",
     "Good to know, I'll come back with my manager."),
    ("Can you integrate with HubSpot?", "We do, along with most CRMs that have an API. What are you using today?",
     "HubSpot and a lot of spreadsheets."),
]  # fmt: skip

DOCS_PAGES = [
    ("/current/get-started/quick-start/", "redpanda"), ("/current/get-started/intro-to-events/", "redpanda"),
    ("/current/deploy/deployment-option/self-hosted/kubernetes/", "redpanda"),
    ("/current/manage/cluster-maintenance/cluster-balancing/", "redpanda"),
    ("/current/develop/produce-data/configure-producers/", "redpanda"),
    ("/redpanda-cloud/get-started/cluster-types/byoc/", "redpanda-cloud"),
    ("/redpanda-cloud/security/authorization/rbac/", "redpanda-cloud"),
    ("/redpanda-connect/components/inputs/kafka/", "redpanda-connect"),
    ("/redpanda-connect/guides/bloblang/about/", "redpanda-connect"),
]  # fmt: skip
DOCS_SEARCHES = ["tiered storage", "acks=all", "consumer lag", "schema registry", "rack awareness", "byoc aws"]
MCP_CONTEXTS = [
    "size a 3-node cluster for 50 MB/s", "migrate consumers from Kafka without downtime",
    "configure SASL/SCRAM for a new client", "pick a retention policy for clickstream events",
    "set up tiered storage on S3",
]  # fmt: skip
KAPA_QUESTIONS = [
    "How many partitions should a topic with 20 consumers have?", "Does BYOC support private link?",
    "What is the difference between acks=1 and acks=all?", "How do I rotate TLS certificates?",
]  # fmt: skip


def form_message(service_type: str, *, company: str, pick) -> str:
    return pick(MESSAGES[service_type]).format(company=company or "our company", n=pick([3, 4, 5, 8, 12]))


def form_steps(service_type: str, *, pick) -> dict:
    return {question: pick(answers) for question, answers in STEPS.get(service_type, {}).items()}


def chat_turns(*, lead_fields: dict, prototype: bool, pick) -> list[tuple[str, str]]:
    """The conversation in which the sales agent took a lead's details: (role, content) in order."""
    label = SERVICE_LABELS[lead_fields["service_type"]]
    name = lead_fields["first_name"]
    closing = "I've passed your details to our team: someone will call you shortly."
    if prototype:
        closing += " I'm also preparing a first prototype for you: you'll see it on this page in a few minutes."
    return [
        ("user", pick(CHAT_OPENERS).format(label=label)),
        ("assistant", f"Yes, {label} is one of our main services. What are you trying to solve?"),
        ("user", lead_fields["message"]),
        ("assistant", "That's a good fit for us. Could I have your name and the best email to reach you?"),
        ("user", f"{name} {lead_fields['last_name']}, {lead_fields['email']}"),
        ("assistant", f"Thanks {name}! {closing}"),
    ]


def chat_only_turns(*, pick) -> list[tuple[str, str]]:
    """A conversation that produced no lead."""
    question, answer, reply = pick(CHAT_ONLY)
    return [("user", question), ("assistant", answer), ("user", reply)]


# --- lead-notification emails (the booking system's, sometimes forwarded by the front desk) -------------------


def notification_email(*, store, person: dict, lead_type: str, booked: datetime | None, sent_at: datetime,
                       forwarded_by: str = "", unreadable: bool = False) -> bytes:  # fmt: skip
    """A notification as a store's booking system sends it to lead-tracking+{ID}@…; `forwarded_by`: the front
    desk address that forwarded it; `unreadable`: the kind of notification the parser cannot read."""
    name = f"{person['first_name']} {person['last_name']}"
    subject = f"New {lead_type}: {name}"
    if unreadable:
        subject, body = "Your new lead report", "Your lead report is attached as a PDF.\n"
    else:
        lines = ["You have a new lead from your website.", "", f"Lead Type: {lead_type}", f"Name: {name}"]
        if person["email"]:
            lines.append(f"Email: {person['email']}")
        if person["phone"]:
            lines.append(f"Phone: {_national(person['phone'])}")
        if booked is not None:
            lines += [f"Booked Date: {booked:%m/%d/%Y}", f"Booked Time: {booked:%I:%M %p}"]
        body = "\n".join(lines) + "\n"
    message = EmailMessage()
    message["To"] = f"lead-tracking+{store.tracking_id}@example.com"
    message["Date"] = format_datetime(sent_at)
    if forwarded_by:
        message["From"] = f"{store.name} front desk <{forwarded_by}>"
        message["Subject"] = f"Fwd: {subject}"
        original = (
            f"---------- Forwarded message ---------\nFrom: {store.franchise} <{store.lead_email}>\n"
            f"Date: {sent_at:%a, %b %d, %Y at %I:%M %p}\nSubject: {subject}\nTo: <{forwarded_by}>\n\n"
        )
        body = "FYI, this one came to the front desk.\n\n" + original + body
    else:
        message["From"] = f"{store.franchise} {store.name} <{store.lead_email}>"
        message["Subject"] = subject
    message.set_content(body)
    return message.as_bytes()


def _national(e164: str) -> str:
    """+12125550134 → (212) 555-0134, as booking systems print US numbers."""
    digits = e164[2:]
    return f"({digits[:3]}) {digits[3:6]}-{digits[6:]}"


# --- inbound platforms: each request body as the platform sends it --------------------------------------------


def _compact(document) -> str:
    return json.dumps(document, separators=(",", ":"))


def facebook_notification(*, leadgen_id: str, page_id: str, form_id: str, created: datetime) -> str:
    """A Page `leadgen` webhook: ids only; the answers are fetched from the Graph API."""
    value = {"ad_id": "120210000000000001", "adgroup_id": "120210000000000002", "form_id": form_id,
             "leadgen_id": leadgen_id, "page_id": page_id, "created_time": int(created.timestamp())}  # fmt: skip
    entry = {"id": page_id, "time": int(created.timestamp()), "changes": [{"field": "leadgen", "value": value}]}
    return _compact({"object": "page", "entry": [entry]})


def facebook_graph_lead(*, leadgen_id: str, form_id: str, fields: dict, created: datetime) -> dict:
    """The lead as the Graph API answers the fetch."""
    data = [
        {"name": "full_name", "values": [f"{fields['first_name']} {fields['last_name']}"]},
        {"name": "email", "values": [fields["email"]]},
    ]
    if fields["phone"]:
        data.append({"name": "phone_number", "values": [fields["phone"]]})
    data.append({"name": "which_class_interests_you?", "values": [fields["steps"]["which_class_interests_you?"]]})
    return {"id": leadgen_id, "created_time": created.strftime("%Y-%m-%dT%H:%M:%S+0000"), "form_id": form_id,
            "is_organic": False, "platform": "fb", "field_data": data}  # fmt: skip


def google_ads_body(*, lead_id: str, fields: dict, key: str, is_test: bool = False) -> str:
    columns = [
        {"column_id": "FULL_NAME", "string_value": f"{fields['first_name']} {fields['last_name']}"},
        {"column_id": "EMAIL", "string_value": fields["email"]},
    ]
    if fields["phone"]:
        columns.append({"column_id": "PHONE_NUMBER", "string_value": fields["phone"]})
    if fields["company"]:
        columns.append({"column_id": "COMPANY_NAME", "string_value": fields["company"]})
    return _compact({"lead_id": lead_id, "api_version": "1.0", "form_id": 40001, "campaign_id": 20001,
                     "google_key": key, "is_test": is_test, "user_column_data": columns})  # fmt: skip


def typeform_body(*, token: str, fields: dict, submitted: datetime, partial: bool = False) -> str:
    answers = [
        {"type": "text", "text": fields["first_name"],
         "field": {"id": "a1", "ref": "first_name", "type": "short_text"}},
        {"type": "text", "text": fields["last_name"], "field": {"id": "a2", "ref": "last_name", "type": "short_text"}},
        {"type": "email", "email": fields["email"], "field": {"id": "a3", "ref": "email", "type": "email"}},
    ]  # fmt: skip
    if fields["phone"]:
        answers.append({"type": "phone_number", "phone_number": fields["phone"],
                        "field": {"id": "a4", "ref": "phone", "type": "phone_number"}})  # fmt: skip
    goal = fields["steps"]["goal"]
    answers.append({"type": "choice", "choice": {"label": goal}, "field": {"id": "a5", "ref": "goal", "type":
                    "multiple_choice"}})  # fmt: skip
    response = {"form_id": "DemoTrial", "token": token, "submitted_at": submitted.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "answers": answers}  # fmt: skip
    event = "form_response_partial" if partial else "form_response"
    return _compact({"event_id": f"ev{token[:12]}", "event_type": event, "form_response": response})


def webflow_body(*, submission_id: str, fields: dict, submitted: datetime) -> str:
    data = {"Name": f"{fields['first_name']} {fields['last_name']}", "Email": fields["email"]}
    if fields["phone"]:
        data["Phone"] = fields["phone"]
    if fields["message"]:
        data["Message"] = fields["message"]
    payload = {"name": "Free class request", "siteId": "64f0c0ffee0000000000d3m0", "data": data,
               "submittedAt": submitted.strftime("%Y-%m-%dT%H:%M:%S.000Z"), "id": submission_id,
               "formId": "64f0c0ffee0000000000f0rm"}  # fmt: skip
    return _compact({"triggerType": "form_submission", "payload": payload})


def generic_body(*, fields: dict) -> str:
    """A partner's own JSON, read by the generic source's default mapping."""
    document = {"name": f"{fields['first_name']} {fields['last_name']}", "email": fields["email"],
                "company": fields["company"], "message": fields["message"], "referred_by": "Acme Partners"}  # fmt: skip
    if fields["phone"]:
        document["phone"] = fields["phone"]
    return _compact(document)


def booked_at(day: date, slot: int) -> datetime:
    """The class a booking system booked: day at 06:00 plus `slot` half hours."""
    return datetime.combine(day, time(6, 0)).replace(hour=6 + slot // 2, minute=30 * (slot % 2))
