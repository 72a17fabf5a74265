"""The demo office's last 90 days: leads of every channel with a weekday rhythm (fewer at weekends, most
mid-morning), the contacts they became with their timelines and outreach tasks, chats, prototypes, the inbound
platforms' request log, docs and MCP users, and the jobs the worker ran, a few of them dead-lettered.

Rows are written as the real flows leave them (bulk inserts, no job enqueued, nothing sent). Where the product
has a cheap pure function for a step (identity keys, the rules classifier, due times past quiet hours, who is on
shift, the email parser) the office uses it, so the figures add up as they would in production. One seed: the
same office for the same `now`.
"""

import random
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db import connection
from faker import Faker

from chat.models import ChatMessage, ChatSession
from crm.assignment import rep_on_shift
from crm.escalation import ALERT_KIND, TASK_ESCALATED_EVENT
from crm.identity import email_key, phone_key
from crm.intake import LEAD_CREATED, lead_created_key
from crm.models import Contact, Task, TimelineEvent
from crm.services import (
    CHAT_LINKED_EVENT,
    DOCS_SIGNED_IN_EVENT,
    LEAD_ACTORS,
    LEAD_CREATED_EVENT,
    TASK_CONTACTED_EVENT,
    TASK_DONE_EVENT,
    _suggested_actions,
)
from crm.sla import outreach_due_at
from demo import texts
from demo.staff import STAFF, STORES, Staff
from docs_users.activity import company_from_email
from docs_users.models import TrackedUser
from jobs.kinds import DEAD_ALERT_KIND
from jobs.models import Job, JobAttempt
from leadgen.consent import CONSENT_TEXT, CONSENT_VERSION
from leadgen.models import Lead
from leadgen.rules import classify_by_rules
from leadgen.services import LEAD_ARRIVED, status_for
from prototypes import processor as prototype_processor
from prototypes.models import Prototype, PrototypeEvent
from sources.models import InboundLead, InboundRequest
from sources.services import FETCH_KIND, fetch_key
from tracking.parsing import parse_lead_email
from tracking.services import LEAD_RETRY_KIND, LEAD_RETRY_MAX_ATTEMPTS

SEED = 20260
DAYS = 90
# Leads on an ordinary weekday, by the day of the week (Monday first), and by the hour of the local day.
LEADS_PER_DAY = 12
WEEKDAY_FACTOR = (1.0, 1.15, 1.1, 1.0, 0.85, 0.35, 0.25)
HOUR_WEIGHTS = (0.2, 0.1, 0.1, 0.1, 0.2, 0.4, 1, 2, 4, 7, 9, 8, 6, 5, 6, 6, 5, 4, 3, 2.5, 2, 1.5, 1, 0.5)
CHANNELS = {"web_form": 34, "email": 33, "facebook": 10, "google_ads": 8, "typeform": 6, "webflow": 5, "webhook": 4}
SOURCE_KINDS = {"facebook": "facebook", "google_ads": "google_ads", "typeform": "typeform", "webflow": "webflow",
                "webhook": "generic"}  # fmt: skip
SOURCE_CHANNELS = {kind: channel for channel, kind in SOURCE_KINDS.items()}
SERVICE_TYPES = {"diagnostic": 25, "process_automation": 22, "strategic_advice": 18, "technology_strategy": 12,
                 "dedicated_team": 10, "": 13}  # fmt: skip
LEAD_TYPES = {"Web Lead": 35, "Online Intro": 25, "Intro Class": 20, "Free Trial": 15, "Referral": 5}
WEB_AREA_CODES = ("206", "303", "404", "512", "602", "617", "704", "801", "919", "971", "305", "214")
POOL_ZONE = "America/New_York"
# Kept by the product only so long (retention): the office has no older ones either.
JOBS_DAYS = 14
REQUEST_LOG_DAYS = 30
TRACKED_ACTIVE_DAYS = 28
# Unfinished prototypes are older than the processor's recovery window (2 days), so it leaves them as they are.
UNFINISHED_AGE = (timedelta(days=2, hours=6), timedelta(days=6))
UNFINISHED_STATES = ("queued", "generating", "awaiting_plan", "interrupted", "stale")
BATCH = 1000


@dataclass
class Arrival:
    """One lead as it arrives, with what the later steps need to know about it."""

    lead: Lead
    at: datetime  # when it arrived (received, else recorded)
    person: dict | None = None  # the person it names, when sales works it
    chat: bool = False
    source: object = None
    platform_id: str = ""
    body: str = ""
    headers: dict = field(default_factory=dict)
    fetched: dict = field(default_factory=dict)
    prototype_state: str = ""
    session: ChatSession | None = None
    prototype: Prototype | None = None
    delivery_dead: bool = False  # its Pipedrive delivery failed every attempt: a dead job to replay


class Office:
    def __init__(self, staff: Staff, *, now: datetime):
        self.staff, self.now = staff, now
        self.start = now - timedelta(days=DAYS)
        self.rng = random.Random(SEED)
        self.fake = Faker("en_US")
        self.fake.seed_instance(SEED)
        self.stores = {spec.tracking_id: staff.stores[spec.tracking_id] for spec in STORES}
        self.area_codes = {self.stores[spec.tracking_id].pk: spec.area_codes for spec in STORES}
        self.people: dict[int | None, list[dict]] = defaultdict(list)
        self.emails: set[str] = set()
        self.phones: set[str] = set()
        self.dedup_keys: set[str] = set()
        self.arrivals: list[Arrival] = []
        self.counts: dict[str, int] = {}

    # --- randomness -------------------------------------------------------------------------------------------
    def pick(self, choices):
        return self.rng.choice(list(choices))

    def weighted(self, weights: dict):
        return self.rng.choices(list(weights), weights=list(weights.values()))[0]

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(int=self.rng.getrandbits(128), version=4)

    def token(self, length: int, alphabet: str = "abcdefghijklmnopqrstuvwxyz0123456789") -> str:
        return "".join(self.rng.choices(alphabet, k=length))

    def digits(self, length: int) -> str:
        return str(self.rng.randint(1, 9)) + self.token(length - 1, "0123456789")

    def minutes(self, low: float, high: float) -> timedelta:
        return timedelta(seconds=self.rng.uniform(low * 60, high * 60))

    # --- people -----------------------------------------------------------------------------------------------
    def person(self, scope: int | None, *, phone_share: float, company: bool = True) -> dict:
        """Someone new, or now and then someone of the same store (or pool) coming back."""
        known = self.people[scope]
        if known and self.chance(0.12):
            return self.pick(known)
        if known and self.chance(0.015):
            # The same name and company with another email and phone: a likely duplicate for staff to merge.
            twin = self.pick(known)
            if twin["company"]:
                person = {**twin, "email": self.email(twin["first_name"], twin["last_name"]),
                          "phone": self.phone(self.area_codes.get(scope, WEB_AREA_CODES))}  # fmt: skip
                known.append(person)
                return person
        first, last = self.fake.first_name(), self.fake.last_name()
        person = {
            "first_name": first, "last_name": last, "email": self.email(first, last),
            "phone": self.phone(self.area_codes.get(scope, WEB_AREA_CODES)) if self.chance(phone_share) else "",
            "company": self.fake.company() if company else "",
        }  # fmt: skip
        known.append(person)
        return person

    def email(self, first: str, last: str, *, domain: str = "") -> str:
        local = ".".join("".join(c for c in part.lower() if c.isalpha()) for part in (first, last))
        domain = domain or self.pick(["example.com", "example.org", "example.net"])
        address = f"{local}@{domain}"
        while address in self.emails:
            address = f"{local}{self.rng.randint(2, 99)}@{domain}"
        self.emails.add(address)
        return address

    def phone(self, area_codes) -> str:
        """A number of the 555-01XX range, kept for fiction: never someone's real phone."""
        for attempt in range(50):
            codes = area_codes if attempt < 25 else WEB_AREA_CODES
            number = f"+1{self.pick(codes)}55501{self.rng.randint(0, 99):02d}"
            if number not in self.phones:
                self.phones.add(number)
                return number
        return ""

    # --- when leads arrive ------------------------------------------------------------------------------------
    def arrival_times(self):
        """(channel, store or None, arrival time) for every lead of the 90 days, oldest first."""
        pool = ZoneInfo(POOL_ZONE)
        first = self.start.astimezone(pool).date()
        plan = []
        for offset in range(DAYS + 1):
            day = first + timedelta(days=offset)
            trend = 0.85 + 0.3 * offset / DAYS  # the office grows over the quarter
            mean = LEADS_PER_DAY * WEEKDAY_FACTOR[day.weekday()] * trend
            for _ in range(max(0, round(self.rng.gauss(mean, mean**0.5)))):
                channel = self.weighted(CHANNELS)
                store = None
                if channel == "email":
                    store = self.weighted({spec.tracking_id: spec.share for spec in STORES})
                elif channel in SOURCE_KINDS:
                    store = next(s for s in self.staff.sources if s.kind == SOURCE_KINDS[channel]).store.tracking_id
                zone = ZoneInfo(self.stores[store].timezone) if store else pool
                hour = self.rng.choices(range(24), weights=HOUR_WEIGHTS)[0]
                local = datetime.combine(day, time(hour, self.rng.randint(0, 59), self.rng.randint(0, 59)), zone)
                at = local.astimezone(UTC)
                if self.start <= at <= self.now - timedelta(minutes=2):
                    plan.append((at, channel, store))
        plan.sort(key=lambda item: item[0])
        return plan

    # --- leads ------------------------------------------------------------------------------------------------
    def leads_plan(self) -> None:
        for at, channel, store in self.arrival_times():
            if channel == "web_form":
                arrival = self.web_lead(at)
            elif channel == "email":
                arrival = self.email_lead(at, self.stores[store])
            else:
                arrival = self.source_lead(at, next(s for s in self.staff.sources if s.kind == SOURCE_KINDS[channel]))
            if arrival is not None:
                self.arrivals.append(arrival)
        self.prototypes_plan()
        delivered = [
            a for a in self.arrivals
            if a.lead.pipedrive_state == Lead.PipedriveState.SYNCED and a.at >= self.now - timedelta(days=3)
        ]  # fmt: skip
        for arrival in self.rng.sample(delivered, min(2, len(delivered))):
            arrival.delivery_dead = True
            lead = arrival.lead
            lead.pipedrive_state = Lead.PipedriveState.FAILED
            lead.pipedrive_person_id = lead.pipedrive_org_id = None
            lead.pipedrive_lead_id = lead.pipedrive_cc_email = ""

    def classified(self, *, email: str, message: str, company: str, name: str, llm_share: float) -> dict:
        """The rules classifier's verdict, given as the LLM's where the LLM would have answered."""
        verdict = classify_by_rules(email=email, message=message, company=company, name=name)
        by, confidence, reasoning = verdict.classified_by, verdict.confidence, verdict.reasoning
        if self.chance(llm_share):
            by, confidence = "llm", round(self.rng.uniform(0.82, 0.99), 2)
            reasoning = texts.LLM_REASONING[verdict.category]
        return {"status": status_for(verdict.category), "category": verdict.category, "confidence": confidence,
                "reasoning": reasoning, "classified_by": by}  # fmt: skip

    def delivery(self, lead: Lead, *, at: datetime) -> None:
        """Where a lead sales works stands with Pipedrive and the ClickUp alert after its jobs ran."""
        if lead.status != Lead.Status.LEAD or lead.is_test:
            return
        lead.clickup_task_id = "86" + self.token(7)
        roll = self.rng.random()
        if roll < 0.05:
            lead.pipedrive_state = Lead.PipedriveState.SKIPPED
        elif roll < 0.07 and at < self.now - timedelta(days=JOBS_DAYS):
            lead.pipedrive_state = Lead.PipedriveState.FAILED  # its dead job was replayed long ago, or discarded
        else:
            lead.pipedrive_state = Lead.PipedriveState.SYNCED
            lead.pipedrive_person_id = int(self.digits(6))
            lead.pipedrive_org_id = int(self.digits(5)) if lead.company else None
            lead.pipedrive_lead_id = str(self.uuid())
            lead.pipedrive_cc_email = f"pipedrive-bcc+{lead.pipedrive_person_id}@example.com"

    def web_lead(self, at: datetime) -> Arrival:
        kind = self.weighted({"lead": 87, "spam": 7, "vendor": 6})
        service_type = self.weighted(SERVICE_TYPES)
        if kind == "lead":
            person = self.person(None, phone_share=0.65)
            message = texts.form_message(service_type, company=person["company"], pick=self.pick)
            steps = texts.form_steps(service_type, pick=self.pick)
        else:
            first, last = self.fake.first_name(), self.fake.last_name()
            company = f"{self.fake.last_name()} Digital" if kind == "vendor" else ""
            person = {"first_name": first, "last_name": last, "email": self.email(first, last, domain="example.net"),
                      "phone": "", "company": company}  # fmt: skip
            message = self.pick(texts.SPAM_MESSAGES if kind == "spam" else texts.VENDOR_MESSAGES).format(
                company="your company"
            )
            service_type, steps = "", {}
        fields = {name: person[name] for name in ("first_name", "last_name", "email", "phone", "company")}
        verdict = self.classified(email=fields["email"], message=message, company=fields["company"],
                                  name=f"{fields['first_name']} {fields['last_name']}", llm_share=0.7)  # fmt: skip
        lead = Lead(
            public_id=self.uuid(), channel=Lead.Channel.WEB_FORM, **fields, message=message, service_type=service_type,
            steps=steps, source_page=texts.SOURCE_PAGES[service_type], utm=self.pick(texts.UTMS),
            client_ip=f"{self.pick(['192.0.2', '198.51.100', '203.0.113'])}.{self.rng.randint(1, 254)}",
            consent_text=CONSENT_TEXT, consent_version=CONSENT_VERSION, consented_at=at, **verdict,
            created_at=at, updated_at=at + self.minutes(0.5, 3),
        )  # fmt: skip
        self.delivery(lead, at=at)
        return Arrival(lead=lead, at=at, person=person if lead.status == Lead.Status.LEAD else None,
                       chat=self.chance(0.35))  # fmt: skip

    def email_lead(self, at: datetime, store) -> Arrival | None:
        person = self.person(store.pk, phone_share=0.95, company=False)
        lead_type = self.weighted(LEAD_TYPES)
        booked = None
        if lead_type in ("Online Intro", "Intro Class", "Free Trial"):
            day = at.astimezone(ZoneInfo(store.timezone)).date() + timedelta(days=self.rng.randint(1, 7))
            booked = texts.booked_at(day, self.rng.randint(0, 27))
        forwarded_by = f"frontdesk.{store.name.lower().replace(' ', '')}@example.com" if self.chance(0.08) else ""
        raw = texts.notification_email(
            store=store, person=person, lead_type=lead_type, booked=booked, sent_at=at - timedelta(seconds=20),
            forwarded_by=forwarded_by, unreadable=self.chance(0.03),
        )  # fmt: skip
        parsed = parse_lead_email(raw, default_region=settings.PHONE_DEFAULT_REGION, received_at=at)
        if parsed.dedup_key in self.dedup_keys:
            return None  # the same notification twice: the poller keeps one lead
        self.dedup_keys.add(parsed.dedup_key)
        synced = at + self.minutes(0.2, settings.IMAP_POLL_SECONDS / 60)
        lead = Lead(
            public_id=self.uuid(), channel=Lead.Channel.EMAIL, dedup_key=parsed.dedup_key, lead_type=parsed.lead_type,
            first_name=parsed.first_name, last_name=parsed.last_name, email=parsed.email, phone=parsed.phone,
            email_subject=parsed.subject, email_from=parsed.email_from, email_recipient=parsed.email_recipient,
            tracking_id=parsed.tracking_id, raw_body=parsed.raw_body, is_forwarded=parsed.is_forwarded,
            forwarded_original_from=parsed.forwarded_original_from,
            forwarded_original_to=parsed.forwarded_original_to,
            forwarded_original_date=parsed.forwarded_original_date, parse_error=parsed.parse_error,
            booked_date=parsed.booked_date, booked_time=parsed.booked_time, received_at=at, synced_at=synced,
            processed_by="imap-poller", store=store, franchise=store.franchise, account_id=store.account_id,
            parse_state=Lead.ParseState.FAILED if parsed.parse_error else Lead.ParseState.PARSED,
            created_at=synced, updated_at=synced,
        )  # fmt: skip
        complete = not parsed.parse_error and (parsed.phone or parsed.email)
        return Arrival(lead=lead, at=at, person=person if complete else None)

    def source_lead(self, at: datetime, source) -> Arrival:
        kind = source.kind
        store = source.store
        person = self.person(store.pk, phone_share=0.8, company=kind in ("google_ads", "webhook", "generic"))
        fields = {name: person[name] for name in ("first_name", "last_name", "email", "phone", "company")}
        fields |= {"message": "", "steps": {}, "service_type": source.default_service_type, "utm": {}}
        spam = self.chance(0.04)
        if spam:
            fields["message"] = self.pick(texts.SPAM_MESSAGES)
        is_test = False
        if kind == "facebook":
            fields["steps"] = {"which_class_interests_you?": self.pick(["HIIT", "Yoga", "Strength", "Spin"])}
            platform_id = self.digits(15)
            form_id = "730000000000001"
            body = texts.facebook_notification(leadgen_id=platform_id, page_id="109000000000001", form_id=form_id,
                                               created=at)  # fmt: skip
            fetched = {platform_id: texts.facebook_graph_lead(leadgen_id=platform_id, form_id=form_id,
                                                              fields=fields, created=at)}  # fmt: skip
            fields["utm"] = {"content": form_id}
            headers = {"content-type": "application/json", "user-agent": "facebookexternalua",
                       "x-hub-signature-256": "sha256=" + self.token(64, "0123456789abcdef")}  # fmt: skip
        elif kind == "google_ads":
            platform_id = "TeSter-" + self.token(40, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
            is_test = self.chance(0.02)
            body = texts.google_ads_body(lead_id=platform_id, fields=fields, key=source.secret, is_test=is_test)
            fields["utm"] = {"campaign": "20001", "content": "40001"}
            headers = {"content-type": "application/json", "user-agent": "Google-Ads-Lead-Forms"}
            fetched = {}
        elif kind == "typeform":
            platform_id = self.token(32)
            fields["steps"] = {"goal": self.pick(["Lose weight", "Build strength", "Train for a race", "Feel better"])}
            body = texts.typeform_body(token=platform_id, fields=fields, submitted=at)
            fields["utm"] = {"content": "DemoTrial"}
            headers = {"content-type": "application/json", "user-agent": "Typeform Webhooks",
                       "typeform-signature": "sha256=" + self.token(43, "abcdefghijklmnopqrstuvwxyzABCDEF0123456789+/")
                       + "="}  # fmt: skip
            fetched = {}
        elif kind == "webflow":
            platform_id = self.token(24, "0123456789abcdef")
            fields["message"] = fields["message"] or self.pick(["", "Is parking available?", "Can I bring a friend?"])
            body = texts.webflow_body(submission_id=platform_id, fields=fields, submitted=at)
            fields["utm"] = {"content": "64f0c0ffee0000000000f0rm"}
            headers = {"content-type": "application/json", "user-agent": "Webflow",
                       "x-webflow-timestamp": str(int(at.timestamp() * 1000)),
                       "x-webflow-signature": self.token(64, "0123456789abcdef")}  # fmt: skip
            fetched = {}
        else:
            platform_id = "msg_" + self.token(27, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
            fields["message"] = fields["message"] or texts.form_message("diagnostic", company=fields["company"],
                                                                        pick=self.pick)  # fmt: skip
            body = texts.generic_body(fields=fields)
            headers = {"content-type": "application/json", "user-agent": "AcmePartners/2.1", "webhook-id": platform_id,
                       "webhook-timestamp": str(int(at.timestamp())),
                       "webhook-signature": "v1," + self.token(43, "abcdefghijklmnopqrstuvwxyzABCDEF0123456789+/")
                       + "="}  # fmt: skip
            fetched = {}
        verdict = self.classified(email=fields["email"], message=fields["message"], company=fields["company"],
                                  name=f"{fields['first_name']} {fields['last_name']}", llm_share=0.6)  # fmt: skip
        lead = Lead(public_id=self.uuid(), channel=SOURCE_CHANNELS[kind], store=store, is_test=is_test,
                    **fields, **verdict, created_at=at, updated_at=at + self.minutes(0.2, 2))  # fmt: skip
        self.delivery(lead, at=at)
        works = lead.status == Lead.Status.LEAD and not is_test
        return Arrival(lead=lead, at=at, person=person if works else None, source=source, platform_id=platform_id,
                       body=body, headers=headers, fetched=fetched)  # fmt: skip

    # --- prototypes -------------------------------------------------------------------------------------------
    def prototypes_plan(self) -> None:
        """Every prototype-eligible real lead of the web form opened one: most completed, some failed, and one in
        each unfinished state."""
        eligible = [
            a for a in self.arrivals
            if a.lead.channel == Lead.Channel.WEB_FORM and a.lead.status == Lead.Status.LEAD
            and a.lead.service_type in settings.LEADS_PROTOTYPE_SERVICE_TYPES
        ]  # fmt: skip
        young, old = self.now - UNFINISHED_AGE[0], self.now - UNFINISHED_AGE[1]
        window = [a for a in eligible if old <= a.at <= young]
        if len(window) < len(UNFINISHED_STATES):
            window = [a for a in eligible if a.at <= young][-len(UNFINISHED_STATES) :]
        for arrival, state in zip(self.rng.sample(window, len(UNFINISHED_STATES)), UNFINISHED_STATES, strict=True):
            arrival.prototype_state = state
        for arrival in eligible:
            if not arrival.prototype_state:
                arrival.prototype_state = "completed" if self.chance(0.82) else "failed"
            if arrival.prototype_state == "completed":
                arrival.lead.preview_url = f"https://preview.example.com/p/{self.token(12)}"

    # --- writing ----------------------------------------------------------------------------------------------
    def load(self) -> dict[str, int]:
        self.leads_plan()
        self.count("leads", _insert([arrival.lead for arrival in self.arrivals]))
        self.chats_write()
        self.prototypes_write()
        self.requests_write()
        docs_sign_ins = self.tracked_users_write()
        self.crm_write(docs_sign_ins)
        self.jobs_write()
        return self.counts

    def count(self, name: str, rows: list) -> list:
        self.counts[name] = self.counts.get(name, 0) + len(rows)
        return rows

    def chats_write(self) -> None:
        """The sales agent's chats: those that took a lead's details, and more that ended without one."""
        sessions, transcripts = [], []
        for arrival in self.arrivals:
            if not arrival.chat:
                continue
            lead = arrival.lead
            began = arrival.at - self.minutes(3, 12)
            arrival.session = ChatSession(
                session_id=f"web-{self.token(24)}", client_ip=lead.client_ip, lead=lead, first_seen_at=began,
                last_seen_at=arrival.at + self.minutes(0.3, 2),
            )  # fmt: skip
            fields = {"first_name": lead.first_name, "last_name": lead.last_name, "email": lead.email,
                      "message": lead.message, "service_type": lead.service_type}  # fmt: skip
            turns = texts.chat_turns(lead_fields=fields, prototype=bool(arrival.prototype_state), pick=self.pick)
            sessions.append(arrival.session)
            transcripts.append((arrival.session, turns, arrival.at, True))
        web = [arrival for arrival in self.arrivals if arrival.lead.channel == Lead.Channel.WEB_FORM]
        for _ in range(round(len(sessions) * 1.6)):
            began = self.pick(web).at - self.minutes(5, 600)
            if began < self.start:
                continue
            ended = began + self.minutes(1, 6)
            session = ChatSession(session_id=f"web-{self.token(24)}", first_seen_at=began, last_seen_at=ended,
                                  client_ip=f"203.0.113.{self.rng.randint(1, 254)}")  # fmt: skip
            sessions.append(session)
            transcripts.append((session, texts.chat_only_turns(pick=self.pick), ended, False))
        self.count("chat sessions", _insert(sessions))
        messages = []
        for session, turns, ended, made_lead in transcripts:
            step = (ended - session.first_seen_at) / len(turns)
            for n, (role, content) in enumerate(turns):
                last = n == len(turns) - 1
                state, metadata = ChatMessage.State.COMPLETE, {}
                if made_lead and last:
                    metadata = {"tools": ["create_lead"]}
                elif role == "assistant" and not made_lead and self.chance(0.03):
                    # The agent failed before saying anything: the visitor left.
                    state, content, metadata = ChatMessage.State.FAILED, "", {"error": "the agent did not answer"}
                messages.append(ChatMessage(session=session, role=role, content=content, metadata=metadata,
                                            state=state, created_at=session.first_seen_at + step * n))  # fmt: skip
                if state == ChatMessage.State.FAILED:
                    break
        self.count("chat messages", _insert(messages))

    def prototypes_write(self) -> None:
        prototypes, events = [], []
        for arrival in self.arrivals:
            if not arrival.prototype_state:
                continue
            lead, state = arrival.lead, arrival.prototype_state
            company = lead.company or f"the {lead.last_name} team"
            prototype = Prototype(lead=lead, state=state, created_at=lead.created_at, state_changed_at=lead.created_at)
            arrival.prototype = prototype
            prototypes.append(prototype)
            log = []  # (kind, data, at)
            at = lead.created_at + (self.minutes(0.05, 0.2) if arrival.chat else self.minutes(0.3, 2))
            if state != "queued":
                title = texts.PROTOTYPE_TITLES[lead.service_type].format(company=company)
                prototype.title, prototype.started_at, prototype.generating_since = title, at, at
                prototype.chat_id, prototype.message_id = self.token(11), self.token(11)
                log.append(("progress", {"state": "generating", "status": prototype_processor.STARTING,
                                         "title": "", "step": 0}, at))  # fmt: skip
                at += self.minutes(0.05, 0.3)
                log.append(("progress", {"state": "generating", "status": prototype_processor.CHAT_CREATED,
                                         "title": "", "step": 0}, at))  # fmt: skip
                finished = state in Prototype.TERMINAL
                for step, status in enumerate(texts.PROTOTYPE_STEPS[: self.rng.randint(3, 5) if finished else 2], 1):
                    at += self.minutes(0.3, 1.5)
                    log.append(("progress", {"state": "generating", "status": status, "title": title, "step": step},
                                at))  # fmt: skip
            if state == "completed":
                at += self.minutes(0.5, 2)
                prototype.preview_url, prototype.finished_at = lead.preview_url, at
                log.append(("complete", {"state": state, "previewUrl": lead.preview_url, "title": prototype.title}, at))
            elif state == "failed":
                at += self.minutes(1, 4)
                prototype.finished_at = at
                prototype.last_error = self.pick([
                    "permanent: v0: HTTP 400", "V0 refused the request (content filter)",
                    "the generation stopped making progress after 3 recoveries",
                ])  # fmt: skip
                log.append(("error", {"state": state, "message": prototype_processor.VISITOR_FAILED}, at))
            elif state == "interrupted":
                prototype.continue_attempts = 1
            elif state == "stale":
                prototype.recovery_attempts = 1
            prototype.state_changed_at = at
            prototype.last_checked_at = at if state != "queued" else None
            every = timedelta(seconds=settings.PROTOTYPES_CHECK_SECONDS)
            prototype.checks = max(1, round((at - lead.created_at) / every))
            prototype.events = len(log)
            events += [
                PrototypeEvent(prototype=prototype, number=n, kind=kind, data=data, created_at=moment)
                for n, (kind, data, moment) in enumerate(log, 1)
            ]
        self.count("prototypes", _insert(prototypes))
        self.count("prototype events", _insert(events))

    def requests_write(self) -> None:
        """Each platform lead's dedup row, and the request log of the last 30 days (older rows are gone)."""
        requests, made = [], []
        logged_since = self.now - timedelta(days=REQUEST_LOG_DAYS)
        for arrival in self.arrivals:
            if arrival.source is None:
                continue
            lead, request = arrival.lead, None
            if arrival.at >= logged_since:
                outcome = InboundRequest.Outcome.TEST if lead.is_test else InboundRequest.Outcome.CREATED
                result = {"outcome": outcome, "lead_id": lead.pk, "lead": str(lead.public_id)}
                request = InboundRequest(
                    source=arrival.source, store=arrival.source.store, received_at=arrival.at, headers=arrival.headers,
                    body=arrival.body, fetched=arrival.fetched, signature_ok=True, outcome=outcome,
                    results={arrival.platform_id: result}, platform_id=arrival.platform_id, lead=lead,
                )  # fmt: skip
                requests.append(request)
            made.append(InboundLead(source=arrival.source, platform_id=arrival.platform_id, lead=lead, request=request,
                                    created_at=arrival.at))  # fmt: skip
        requests += self.requests_refused(requests)
        requests.sort(key=lambda request: request.received_at)
        self.count("inbound requests", _insert(requests))
        self.count("inbound leads", _insert(made))

    def requests_refused(self, logged: list) -> list:
        """What else a request log holds: a platform's retry, bad signatures, a partial form, a lead without email."""
        extra = []
        by_kind = {source.kind: source for source in self.staff.sources}
        if retried := [r for r in logged if r.source.kind == "webflow" and r.outcome == "created"]:
            first = retried[-1]
            result = {**first.results[first.platform_id], "outcome": InboundRequest.Outcome.DUPLICATE}
            extra.append(InboundRequest(
                source=first.source, store=first.store, received_at=first.received_at + timedelta(seconds=40),
                headers=first.headers, body=first.body, signature_ok=True, outcome=InboundRequest.Outcome.DUPLICATE,
                results={first.platform_id: result}, platform_id=first.platform_id, lead=first.lead,
            ))  # fmt: skip
        for kind, reason in (("facebook", "X-Hub-Signature-256 does not match the body."),
                             ("webflow", "x-webflow-timestamp is more than five minutes from now.")):  # fmt: skip
            source = by_kind[kind]
            extra.append(InboundRequest(
                source=source, store=source.store, received_at=self.now - self.minutes(60, 60 * 24 * 20),
                outcome=InboundRequest.Outcome.REFUSED_SIGNATURE, errors={"signature": [reason]},
            ))  # fmt: skip
        source, at = by_kind["typeform"], self.now - self.minutes(60, 60 * 24 * 10)
        token = self.token(32)
        partial = {"first_name": "", "last_name": "", "email": "", "phone": "", "steps": {"goal": ""}}
        extra.append(InboundRequest(
            source=source, store=source.store, received_at=at, signature_ok=True,
            outcome=InboundRequest.Outcome.IGNORED,
            body=texts.typeform_body(token=token, fields=partial, submitted=at, partial=True),
            headers={"content-type": "application/json", "user-agent": "Typeform Webhooks"},
        ))  # fmt: skip
        source, at = by_kind["webflow"], self.now - self.minutes(60, 60 * 24 * 10)
        submission = self.token(24, "0123456789abcdef")
        nameless = {"first_name": self.fake.first_name(), "last_name": "", "email": "", "phone": "", "message": ""}
        errors = {"email": ["This field is required."]}
        extra.append(InboundRequest(
            source=source, store=source.store, received_at=at, signature_ok=True,
            outcome=InboundRequest.Outcome.INVALID, errors=errors,
            body=texts.webflow_body(submission_id=submission, fields=nameless, submitted=at),
            headers={"content-type": "application/json", "user-agent": "Webflow"}, platform_id=submission,
            results={submission: {"outcome": InboundRequest.Outcome.INVALID, "errors": errors}},
        ))  # fmt: skip
        return extra

    # --- docs and MCP users -----------------------------------------------------------------------------------
    def tracked_users_write(self) -> list[tuple[TrackedUser, datetime]]:
        """Signed-in readers of the docs and users of the MCP server, first seen over the 90 days, each active in
        the last four weeks (retention deletes the others). Returns the docs sign-ins, for their contacts."""
        users = []
        for _ in range(70):
            first_seen = self.start + self.minutes(0, DAYS * 24 * 60)
            last_active = max(first_seen, self.now - timedelta(days=TRACKED_ACTIVE_DAYS))
            last_active += (self.now - timedelta(minutes=5) - last_active) * self.rng.random()
            first, last = self.fake.first_name(), self.fake.last_name()
            company = self.fake.company()
            domain = "-".join("".join(c for c in w.lower() if c.isalnum()) for w in company.split()[:2]) + ".example"
            mcp = self.chance(0.4)
            user = TrackedUser(
                sub=f"auth0|{self.token(24, '0123456789abcdef')}", email=self.email(first, last, domain=domain),
                given_name=first, family_name=last, company=company_from_email(f"x@{domain}"),
                signed_up_at=first_seen, last_sign_in_at=last_active - self.minutes(1, 90),
                last_channel=TrackedUser.Channel.MCP if mcp else TrackedUser.Channel.DOCS_LOGIN,
                last_activity_at=last_active, created_at=first_seen, updated_at=last_active,
            )  # fmt: skip
            if mcp or self.chance(0.2):
                self.mcp_activity(user, first_seen, last_active)
            if not mcp or self.chance(0.5):
                self.docs_activity(user, last_active)
            if last_active > self.now - timedelta(days=1):
                user.pending_since = last_active  # captured since the last daily sync
            else:
                synced = datetime.combine(last_active.date() + timedelta(days=1), time(settings.TRACKING_SYNC_HOUR_UTC),
                                          UTC)  # fmt: skip
                user.last_delivered_at = min(synced, self.now - timedelta(hours=1))
            users.append(user)
        self.count("tracked users", _insert(users))
        return [(user, user.signed_up_at) for user in users if user.last_channel == TrackedUser.Channel.DOCS_LOGIN]

    def mcp_activity(self, user: TrackedUser, first_seen: datetime, last_active: datetime) -> None:
        user.mcp_client = self.pick(["Claude Code", "Cursor", "Claude", "VS Code", "Windsurf", "ChatGPT"])
        user.mcp_tool_counts = {tool: self.rng.randint(1, 60) for tool in ("search_docs", "ask_docs", "get_page")
                                if self.chance(0.7)} or {"search_docs": 1}  # fmt: skip
        user.mcp_last_tool_at = last_active
        moments = sorted((first_seen + (last_active - first_seen) * self.rng.random() for _ in range(3)), reverse=True)
        user.mcp_agent_intents = [
            {"tool": "search_docs", "context": self.pick(texts.MCP_CONTEXTS), "at": at.isoformat()} for at in moments
        ]
        if "ask_docs" in user.mcp_tool_counts:
            user.kapa_asked_thread_count = self.rng.randint(1, 4)
            user.kapa_asked_questions = [
                {"thread_id": str(self.uuid()), "question": self.pick(texts.KAPA_QUESTIONS), "at": at.isoformat()}
                for at in moments[: user.kapa_asked_thread_count]
            ]

    def docs_activity(self, user: TrackedUser, last_active: datetime) -> None:
        pages = self.rng.sample(texts.DOCS_PAGES, self.rng.randint(2, 7))
        user.docs_recent_pages = [path for path, _ in pages]
        user.docs_page_counts = {path: self.rng.randint(1, 9) for path, _ in pages}
        areas = defaultdict(int)
        for path, area in pages:
            areas[area] += user.docs_page_counts[path]
        user.docs_product_areas = dict(areas)
        user.docs_getting_started_visits = sum(n for path, n in user.docs_page_counts.items() if "get-started" in path)
        user.docs_search_terms = self.rng.sample(texts.DOCS_SEARCHES, self.rng.randint(0, 3))
        user.docs_last_active_at = last_active

    # --- contacts, outreach tasks, timelines ------------------------------------------------------------------
    def crm_write(self, docs_sign_ins: list[tuple[TrackedUser, datetime]]) -> None:
        """Every lead sales works joins its contact (matched by email, then phone, within its store or the shared
        pool) and opens an outreach task unless the contact has one open; reps answer them, mostly in time."""
        self.crm = _Crm(self)
        for arrival in self.arrivals:
            if arrival.person is not None:
                self.crm.lead_process(arrival)
        for user, at in docs_sign_ins:
            self.crm.docs_sign_in(user, at)
        self.crm.finish()
        self.count("contacts", _insert(self.crm.contacts))
        self.count("tasks", _insert(self.crm.tasks))
        self.count("timeline events", _insert(self.crm.events))
        for profile in self.crm.picked:
            profile.save(update_fields=["last_assigned_at"])

    # --- jobs -------------------------------------------------------------------------------------------------
    def jobs_write(self) -> None:
        """The jobs of the last two weeks as the worker finished them (older ones are gone: retention), and three
        dead-lettered ones to replay: two Pipedrive deliveries and a parked email lead."""
        since = self.now - timedelta(days=JOBS_DAYS)
        self.jobs, self.attempts = [], []
        for arrival in self.arrivals:
            if arrival.lead.created_at >= since:
                self.lead_jobs(arrival)
        for task in self.crm.tasks:
            if task.escalated_at is not None and task.escalated_at >= since:
                due = task.due_at.isoformat()
                self.job(ALERT_KIND, f"{ALERT_KIND}:{task.pk}:{due}", task.escalated_at + self.minutes(0.05, 0.5),
                         payload={"task_id": str(task.pk), "owner_id": task.assigned_to_id, "due_at": due},
                         store=task.store)  # fmt: skip
        self.parked_lead_job()
        self.count("jobs", _insert(self.jobs))
        self.count("job attempts", _insert(self.attempts))
        # Each death alerted the operators once, through a job of its own.
        alerts, self.attempts = [], []
        for job in self.jobs:
            if job.status == Job.Status.DEAD:
                key = f"{DEAD_ALERT_KIND}:{job.pk}:{job.finished_at.isoformat()}"
                alerts.append(self.job(DEAD_ALERT_KIND, key, job.finished_at + timedelta(seconds=2),
                                       payload={"job_id": job.pk}, max_attempts=5, keep=False))  # fmt: skip
        self.count("jobs", _insert(alerts))
        self.count("job attempts", _insert(self.attempts))

    def lead_jobs(self, arrival: Arrival) -> None:
        lead = arrival.lead
        at, store = lead.created_at, lead.store
        key = lead.job_key
        payload = {"lead_id": lead.pk}
        if lead.channel == Lead.Channel.EMAIL:
            if arrival.person is not None:
                self.job(LEAD_CREATED, lead_created_key(lead.pk), at + self.minutes(0.01, 0.1), payload, store=store)
            return
        if arrival.source is not None and arrival.source.kind == "facebook":
            self.job(FETCH_KIND, fetch_key(arrival.source.pk, arrival.platform_id), at - self.minutes(0.05, 0.2),
                     {"source_id": arrival.source.pk, "leadgen_id": arrival.platform_id}, store=store)  # fmt: skip
        if lead.is_test:
            return
        if lead.status == Lead.Status.VENDOR and arrival.source is None:
            self.job("leadgen.vendor_decline_email", key("leadgen.vendor_decline_email"), at, payload, store=store)
        if lead.status != Lead.Status.LEAD:
            return
        self.job("leadgen.lead_alert", key("leadgen.lead_alert"), at, payload, store=store)
        self.job(LEAD_ARRIVED, key(LEAD_ARRIVED), at, payload, store=store)
        sync = "leadgen.pipedrive_sync"
        if arrival.delivery_dead:
            self.dead_job(sync, key(sync), at, payload, store=store, error="transient: pipedrive: HTTP 503")
        elif lead.pipedrive_state == Lead.PipedriveState.SKIPPED:
            self.job(sync, key(sync), at, payload, store=store, status=Job.Status.SKIPPED,
                     error="skipped: not configured: PIPEDRIVE_API_TOKEN is empty")  # fmt: skip
        elif lead.pipedrive_state == Lead.PipedriveState.SYNCED:
            self.job(sync, key(sync), at, payload, store=store)
            self.job("leadgen.pipedrive_note", key("leadgen.pipedrive_note"), at + self.minutes(0.02, 0.2), payload,
                     store=store)  # fmt: skip
        if arrival.source is None or arrival.source.send_confirmation:
            self.job("leadgen.confirmation_email", key("leadgen.confirmation_email"),
                     at + timedelta(seconds=settings.CONFIRMATION_EMAIL_DELAY), payload, store=store)  # fmt: skip
        if prototype := arrival.prototype:
            self.prototype_jobs(prototype)

    def prototype_jobs(self, prototype: Prototype) -> None:
        every = timedelta(seconds=settings.PROTOTYPES_CHECK_SECONDS)
        for number in range(1, prototype.checks + 1):
            key = f"{prototype_processor.CHECK_KIND}:{prototype.pk}:{number}"
            self.job(prototype_processor.CHECK_KIND, key, prototype.created_at + every * number,
                     {"prototype_id": prototype.pk, "check": number})  # fmt: skip
        kinds = {"completed": (prototype_processor.READY_NOTE_KIND, prototype_processor.READY_ALERT_KIND,
                                prototype_processor.READY_EMAIL_KIND),
                 "failed": (prototype_processor.FAILED_ALERT_KIND,)}.get(prototype.state, ())  # fmt: skip
        for kind in kinds:
            self.job(kind, f"{kind}:{prototype.pk}", prototype.finished_at, {"prototype_id": prototype.pk})

    def parked_lead_job(self) -> None:
        """A lead-notification email the database would not take during an outage, parked and dead after its
        attempts: replaying it writes the lead."""
        store = self.stores["DEMO2"]
        first, last = self.fake.first_name(), self.fake.last_name()
        person = {"first_name": first, "last_name": last, "email": self.email(first, last),
                  "phone": self.phone(self.area_codes[store.pk])}  # fmt: skip
        at = self.now - self.minutes(60 * 20, 60 * 30)
        raw = texts.notification_email(store=store, person=person, lead_type="Free Trial", sent_at=at,
                                       booked=texts.booked_at(at.date() + timedelta(days=2), 24))  # fmt: skip
        parsed = parse_lead_email(raw, default_region=settings.PHONE_DEFAULT_REGION, received_at=at)
        source = f"{self.staff.mailboxes['DEMO2'].name}:{self.rng.randint(10**8, 10**9)}:{self.rng.randint(100, 999)}"
        self.dead_job(LEAD_RETRY_KIND, f"{LEAD_RETRY_KIND}:{source}", at + timedelta(seconds=30),
                      {"lead": parsed.to_json(), "source": source}, store=store,
                      error="transient: lead write failed: OperationalError (SQLSTATE 57P01)",
                      max_attempts=LEAD_RETRY_MAX_ATTEMPTS)  # fmt: skip

    def job(self, kind, key, at, payload, *, store=None, status=Job.Status.SUCCEEDED, error="", max_attempts=None,
            keep=True) -> Job:  # fmt: skip
        """A job the worker ran once, as it left it."""
        finished = at + self.minutes(0.002, 0.05)
        job = Job(
            kind=kind, key=key, payload=payload, store=store, status=status, attempts=1,
            max_attempts=max_attempts or settings.JOBS_DEFAULT_MAX_ATTEMPTS, run_after=at, dispatched_at=at,
            started_at=at, last_error=error, created_at=at, updated_at=finished, finished_at=finished,
        )  # fmt: skip
        duration_ms = int((finished - at).total_seconds() * 1000)
        self.attempts.append(JobAttempt(job=job, number=1, started_at=at, finished_at=finished, outcome=status,
                                        error=error, duration_ms=duration_ms))  # fmt: skip
        if keep:
            self.jobs.append(job)
        return job

    def dead_job(self, kind, key, at, payload, *, store, error: str, max_attempts: int | None = None) -> None:
        """A job that failed every attempt, backing off between them, and was dead-lettered."""
        job = self.job(kind, key, at, payload, store=store, status=Job.Status.DEAD, max_attempts=max_attempts)
        self.attempts.pop()
        started = at
        for number in range(1, job.max_attempts + 1):
            finished = started + self.minutes(0.01, 0.3)
            last = number == job.max_attempts
            text = f"gave up after {number} attempts; {error}" if last else error
            self.attempts.append(JobAttempt(
                job=job, number=number, started_at=started, finished_at=finished,
                outcome=JobAttempt.Outcome.FAILED if last else JobAttempt.Outcome.RETRY, error=text,
                duration_ms=int((finished - started).total_seconds() * 1000),
            ))  # fmt: skip
            if not last:
                delay = min(settings.JOBS_BACKOFF_MAX_SECONDS, settings.JOBS_BACKOFF_BASE_SECONDS * 2 ** (number - 1))
                started = finished + timedelta(seconds=self.rng.uniform(delay / 2, delay))
        job.attempts, job.last_error, job.started_at = job.max_attempts, text, started
        job.finished_at = job.updated_at = finished


@dataclass
class _Known:
    """A contact as the office has it so far: its row, until when its task is open, how its tasks went."""

    contact: Contact
    open_until: datetime | None = None  # its newest task is open until then (datetime.max: still open)
    outcomes: list = field(default_factory=list)  # (outcome, when)


class _Crm:
    """The lead processor and the reps, replayed in arrival order over the 90 days."""

    def __init__(self, office: Office):
        self.office, self.rng = office, office.rng
        self.contacts, self.tasks, self.events = [], [], []
        self.known: dict[tuple, _Known] = {}
        self.last_pick: dict[int, datetime] = {}
        staff = office.staff
        self.profiles = {profile.user_id: profile for profile in staff.profiles.values()}
        self.picked = set()
        store_of = {spec.username: spec.store for spec in STAFF}
        self.reps: dict[int | None, list] = defaultdict(list)
        for username, profile in sorted(staff.profiles.items()):
            store = store_of.get(username)
            self.reps[staff.stores[store].pk if store else None].append(profile)
        self.rules = sorted(staff.rules, key=lambda rule: (rule.priority, rule.pk))
        self.sla = timedelta(minutes=settings.LEAD_OUTREACH_SLA_MINUTES)
        # A rep away now went away ten days ago; before that they took leads as the others.
        self.away_since = office.now - timedelta(days=10)

    def takes_leads(self, profile, at: datetime) -> bool:
        return not (profile.is_away and at >= self.away_since) and rep_on_shift(profile, now=at)

    def owner(self, lead: Lead, at: datetime):
        """As crm.assignment picks: a matching rule's owner on shift, else round-robin among the reps on shift."""
        for rule in self.rules:
            matches = (
                rule.store_id == lead.store_id and rule.is_active
                and rule.service_type in ("", lead.service_type) and rule.channel in ("", lead.channel)
            )  # fmt: skip
            profile = self.profiles.get(rule.owner_id)
            if matches and profile is not None and self.takes_leads(profile, at):
                return profile.user
        eligible = [profile for profile in self.reps[lead.store_id] if self.takes_leads(profile, at)]
        if not eligible:
            return None  # nobody on shift: anyone at the store may take it
        chosen = min(eligible, key=lambda p: (p.user_id in self.last_pick, self.last_pick.get(p.user_id, at), p.pk))
        self.last_pick[chosen.user_id] = chosen.last_assigned_at = at
        self.picked.add(chosen)
        return chosen.user

    def contact(self, *, store, email: str, phone: str, values: dict, at: datetime) -> _Known:
        """The contact of these keys in the store (None: the shared pool), created or completed (crm.identity)."""
        scope = store.pk if store else None
        known = self.known.get((scope, "email", email)) if email else None
        known = known or (self.known.get((scope, "phone", phone)) if phone else None)
        if known is None:
            contact = Contact(store=store, email=email, phone=phone, **values, last_activity_at=at, created_at=at,
                              updated_at=at)  # fmt: skip
            known = _Known(contact)
            self.contacts.append(contact)
        else:
            contact = known.contact
            for name, value in values.items():
                if value and not getattr(contact, name):
                    setattr(contact, name, value)
            for name, key in (("email", email), ("phone", phone)):
                if key and not getattr(contact, name) and (scope, name, key) not in self.known:
                    setattr(contact, name, key)
            contact.last_activity_at = max(contact.last_activity_at, at)
            contact.updated_at = max(contact.updated_at, at)
        for name in ("email", "phone"):
            if value := getattr(contact, name):
                self.known.setdefault((scope, name, value), known)
        return known

    def event(self, contact: Contact, event_type: str, category: str, entity_type: str, entity_id, at: datetime,
              actor: str, values: dict, key: str) -> None:  # fmt: skip
        self.events.append(TimelineEvent(
            contact=contact, store=contact.store, franchise=contact.franchise, account_id=contact.account_id,
            event_type=event_type, event_category=category, entity_type=entity_type, entity_id=str(entity_id),
            occurred_at=at, actor_type=actor, new_value=values, idempotency_key=key,
            created_at=at + timedelta(seconds=self.rng.uniform(0.05, 2)),
        ))  # fmt: skip

    def lead_process(self, arrival: Arrival) -> None:
        lead, at = arrival.lead, arrival.at
        store = lead.store
        values = {"first_name": lead.first_name, "last_name": lead.last_name, "company": lead.company,
                  "franchise": lead.franchise or (store.franchise if store else ""),
                  "account_id": lead.account_id or (store.account_id if store else "")}  # fmt: skip
        email, phone = email_key(lead.email), phone_key(lead.phone)
        known = self.contact(store=store, email=email, phone=phone, values=values, at=at)
        contact = known.contact
        created = {"channel": lead.channel, "leadType": lead.lead_type, "firstName": lead.first_name,
                   "lastName": lead.last_name}  # fmt: skip
        if lead.service_type:
            created["serviceType"] = lead.service_type
        actor = LEAD_ACTORS.get(lead.channel, "lead_source")
        self.event(contact, LEAD_CREATED_EVENT, "lead", "lead", lead.pk, at, actor, created,
                   f"{LEAD_CREATED_EVENT}:{lead.pk}")  # fmt: skip
        if session := arrival.session:
            self.event(contact, CHAT_LINKED_EVENT, "chat", "chat_session", session.pk, session.first_seen_at,
                       "visitor", {"sessionId": session.session_id, "leadId": lead.pk},
                       f"{CHAT_LINKED_EVENT}:{session.pk}")  # fmt: skip
        if known.open_until is not None and known.open_until > at:
            return  # the contact's open task covers this lead too
        self.task(known, lead, at)

    def task(self, known: _Known, lead: Lead, at: datetime) -> None:
        office, contact, store = self.office, known.contact, lead.store
        if store is None:
            zone = ZoneInfo(settings.SHARED_POOL_TIMEZONE)
            quiet = settings.SHARED_POOL_QUIET_HOURS_START, settings.SHARED_POOL_QUIET_HOURS_END
        else:
            zone, quiet = store.zone, (store.quiet_hours_start, store.quiet_hours_end)
        due = outreach_due_at(arrived_at=at, sla_minutes=settings.LEAD_OUTREACH_SLA_MINUTES, zone=zone,
                              start=quiet[0], end=quiet[1])  # fmt: skip
        owner = self.owner(lead, at)
        reason = f"New {lead.lead_type or lead.get_service_type_display() or 'lead'} from {lead.full_name or 'unknown'}"
        task = Task(
            id=office.uuid(), contact=contact, store=store, franchise=contact.franchise, account_id=contact.account_id,
            task_type=Task.TaskType.LEAD_OUTREACH, type_category=Task.TaskType.LEAD_OUTREACH,
            source_type=Task.SourceType.LEAD, source_lead=lead, priority=Task.Priority.HIGH, action_needed=True,
            action_needed_reason=reason[:300], suggested_actions=_suggested_actions(), due_at=due,
            assigned_to=owner, arrived_at=at, lead_recorded_at=lead.created_at,
            created_at=lead.created_at + timedelta(seconds=self.rng.uniform(0.5, 5)),
        )  # fmt: skip
        task.updated_at = task.created_at
        self.tasks.append(task)
        recent = at > office.now - timedelta(days=2)
        # The demo login's own latest leads wait for whoever signs in with it.
        waiting = owner is not None and owner.pk == office.staff.demo.pk and at > office.now - timedelta(days=4)
        answered = due - self.sla + self.response_time()
        if waiting or office.chance(0.15 if recent else 0.012) or answered > office.now:
            task.status, known.open_until = Task.Status.PENDING, datetime.max.replace(tzinfo=UTC)
            known.outcomes.append(("pending", at))
        elif not recent and office.chance(0.012):
            task.status, known.open_until = Task.Status.CANCELLED, task.created_at + self.office.minutes(5, 120)
            task.updated_at = known.open_until
            known.outcomes.append(("cancelled", known.open_until))
        else:
            actor = owner or office.pick(self.reps[lead.store_id]).user
            contacted = office.chance(0.7)
            event_type = TASK_CONTACTED_EVENT if contacted else TASK_DONE_EVENT
            task.status, task.completed_at, task.completed_by = Task.Status.DONE, answered, actor.get_username()
            task.updated_at = known.open_until = answered
            reason = "" if contacted else office.pick(["Left a voicemail", "No answer, sent an email", ""])
            self.event(contact, event_type, "task", "task", task.pk, answered, "staff",
                       {"by": actor.get_username(), "reason": reason}, f"{event_type}:{task.pk}")  # fmt: skip
            known.outcomes.append(("contacted" if contacted else "done", answered))
            if contacted:
                contact.last_activity_at = max(contact.last_activity_at, answered)
        late = task.updated_at if task.status == Task.Status.CANCELLED else task.completed_at or office.now
        if late > due + timedelta(minutes=1):
            # The escalation check runs every minute: the owner's manager heard of it.
            task.escalated_at = due + timedelta(seconds=self.rng.uniform(5, 60))
            owner_name = owner.get_username() if owner else ""
            self.event(contact, TASK_ESCALATED_EVENT, "task", "task", task.pk, task.escalated_at, "system",
                       {"owner": owner_name, "due_at": due.isoformat()},
                       f"{TASK_ESCALATED_EVENT}:{task.pk}:{due.isoformat()}")  # fmt: skip

    def response_time(self) -> timedelta:
        """From arrival (or the end of the quiet hours) to the rep's answer: most within the SLA."""
        minutes = settings.LEAD_OUTREACH_SLA_MINUTES
        roll, office = self.rng.random(), self.office
        if roll < 0.45:
            return office.minutes(0.5, minutes * 0.95)
        if roll < 0.75:
            return office.minutes(minutes + 0.5, 45)
        if roll < 0.9:
            return office.minutes(45, 240)
        return office.minutes(240, 26 * 60)

    def docs_sign_in(self, user: TrackedUser, at: datetime) -> None:
        """A docs reader's verified email joins the shared pool's contact of that email (crm.services)."""
        values = {"first_name": user.given_name, "last_name": user.family_name, "company": user.company,
                  "franchise": "", "account_id": ""}  # fmt: skip
        known = self.contact(store=None, email=email_key(user.email), phone="", values=values, at=at)
        for moment in sorted({at, user.last_sign_in_at}):
            self.event(known.contact, DOCS_SIGNED_IN_EVENT, "docs", "tracked_user", user.pk, moment, "docs_reader", {},
                       f"{DOCS_SIGNED_IN_EVENT}:{user.pk}:{moment.isoformat()}")  # fmt: skip
            known.contact.last_activity_at = max(known.contact.last_activity_at, moment)

    def finish(self) -> None:
        """Where each contact stands after its tasks: reached ones qualified (or not) some days later."""
        now = self.office.now
        for known in {id(known): known for known in self.known.values()}.values():
            contact, outcomes = known.contact, known.outcomes
            if not outcomes:
                continue
            last, when = outcomes[-1]
            if last == "pending":
                reached = any(outcome in ("contacted", "done") for outcome, _ in outcomes)
                contact.lead_status = Contact.LeadStatus.ATTEMPTED if reached else Contact.LeadStatus.NEW
            elif last == "contacted":
                contact.lead_status = Contact.LeadStatus.CONNECTED
                if when < now - timedelta(days=5):
                    roll = self.rng.random()
                    if roll < 0.35:
                        contact.lead_status = Contact.LeadStatus.QUALIFIED
                        contact.lifecycle_stage = Contact.LifecycleStage.PROSPECT
                        if when < now - timedelta(days=20) and self.office.chance(0.35):
                            contact.lifecycle_stage = Contact.LifecycleStage.CUSTOMER
                    elif roll < 0.5:
                        contact.lead_status = Contact.LeadStatus.UNQUALIFIED
            elif last == "done":
                contact.lead_status = Contact.LeadStatus.ATTEMPTED
            contact.updated_at = max(contact.updated_at, when)


def _insert(rows: list) -> list:
    """bulk_create, then the auto_now and auto_now_add columns set back to the times the rows carry: the office
    happened over 90 days, not now."""
    if not rows:
        return rows
    model = type(rows[0])
    stamped = [
        f for f in model._meta.concrete_fields
        if (getattr(f, "auto_now", False) or getattr(f, "auto_now_add", False))
        and all(getattr(row, f.attname) is not None for row in rows)
    ]  # fmt: skip
    wanted = [[getattr(row, f.attname) for f in stamped] for row in rows]
    model.objects.bulk_create(rows, batch_size=BATCH)
    if stamped:
        quote = connection.ops.quote_name
        assignments = ", ".join(f"{quote(f.column)} = %s" for f in stamped)
        statement = f"UPDATE {quote(model._meta.db_table)} SET {assignments} WHERE {quote(model._meta.pk.column)} = %s"
        for row, values in zip(rows, wanted, strict=True):
            for f, value in zip(stamped, values, strict=True):
                setattr(row, f.attname, value)
        with connection.cursor() as cursor:
            cursor.executemany(statement, [[*values, row.pk] for row, values in zip(rows, wanted, strict=True)])
    return rows


def office_load(staff: Staff, *, now: datetime) -> dict[str, int]:
    """Write the office's 90 days up to `now`; the rows written, by kind."""
    return Office(staff, now=now).load()


def office_exists(staff: Staff) -> bool:
    """Whether the office has activity already: then it is left as it is (a rerun adds nothing)."""
    return Lead.objects.filter(store__in=list(staff.stores.values())).exists()
