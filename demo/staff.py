"""The demo office's fixed part: three stores, their staff in each group, reps' shifts, assignment rules,
mailboxes and inbound lead sources. Each row is found by its natural key, so loading it again changes nothing.
"""

import base64
import hashlib
from dataclasses import dataclass
from datetime import time

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from crm.models import AssignmentRule, RepProfile
from foundation.staff_groups import MANAGERS, OPERATIONS, SALES
from sources.models import InboundSource
from stores.models import Store
from tracking.models import Mailbox

DEMO_USERNAME = "demo"
DEMO_PASSWORD = "demo-password"
FRANCHISE = "Demo Fitness"
WEEKDAYS = [1, 2, 3, 4, 5]


@dataclass(frozen=True)
class StoreSpec:
    tracking_id: str
    name: str
    slug: str
    timezone: str
    account_id: str
    lead_email: str
    area_codes: tuple[str, ...]  # of the store's city: its people's phones
    share: float  # of the leads that belong to a store


STORES = (
    StoreSpec("DEMO1", "Downtown", "downtown", "America/New_York", "acct-demo", "leads-demo@example.com",
              ("212", "646", "718", "917"), 0.45),
    StoreSpec("DEMO2", "Riverside", "riverside", "America/Chicago", "acct-demo-2", "leads-riverside@example.com",
              ("312", "773", "872", "630"), 0.35),
    StoreSpec("DEMO3", "Bayview", "bayview", "America/Los_Angeles", "acct-demo-3", "leads-bayview@example.com",
              ("415", "628", "510", "650"), 0.20),
)  # fmt: skip


@dataclass(frozen=True)
class StaffSpec:
    username: str
    first_name: str
    last_name: str
    groups: tuple[str, ...]
    store: str | None = None  # tracking id of the store they work at; None: every store (Managers)
    # A rep's shift: None for staff who take no leads.
    work_days: tuple[int, ...] | None = None
    work_start: time = time(9, 0)
    work_end: time = time(17, 0)
    manager: str = ""
    is_away: bool = False


STAFF = (
    StaffSpec("maya.patel", "Maya", "Patel", (MANAGERS, SALES), work_days=(1, 2, 3, 4, 5)),
    StaffSpec("daniel.okafor", "Daniel", "Okafor", (MANAGERS, SALES), work_days=(1, 2, 3, 4, 5),
              work_start=time(10, 0), work_end=time(18, 0)),
    StaffSpec("sofia.rossi", "Sofia", "Rossi", (SALES,), "DEMO1", (1, 2, 3, 4, 5), time(8, 0), time(16, 0),
              "maya.patel"),
    StaffSpec("liam.walsh", "Liam", "Walsh", (SALES,), "DEMO1", (2, 3, 4, 5, 6), time(11, 0), time(19, 0),
              "maya.patel"),
    StaffSpec("ava.nguyen", "Ava", "Nguyen", (SALES,), "DEMO1", (1, 3, 5, 6), time(9, 0), time(15, 0), "maya.patel"),
    StaffSpec("noah.berg", "Noah", "Berg", (SALES,), "DEMO2", (1, 2, 3, 4, 5), time(8, 0), time(16, 0),
              "daniel.okafor"),
    StaffSpec("emma.diaz", "Emma", "Diaz", (SALES,), "DEMO2", (1, 2, 3, 4, 6), time(10, 0), time(18, 0),
              "daniel.okafor"),
    StaffSpec("lucas.meyer", "Lucas", "Meyer", (SALES,), "DEMO2", (1, 2, 3, 4, 5), manager="daniel.okafor",
              is_away=True),
    StaffSpec("chloe.martin", "Chloe", "Martin", (SALES,), "DEMO3", (1, 2, 3, 4, 5), time(8, 0), time(16, 0),
              "maya.patel"),
    StaffSpec("ethan.brooks", "Ethan", "Brooks", (SALES,), "DEMO3", (2, 3, 4, 5, 6), time(10, 0), time(18, 0),
              "maya.patel"),
    StaffSpec("olivia.reyes", "Olivia", "Reyes", (OPERATIONS,), "DEMO1"),
    StaffSpec("james.cho", "James", "Cho", (OPERATIONS,), "DEMO2"),
    StaffSpec("hannah.fox", "Hannah", "Fox", (OPERATIONS,), "DEMO3"),
)  # fmt: skip


@dataclass(frozen=True)
class RuleSpec:
    store: str | None
    owner: str
    service_type: str = ""
    channel: str = ""
    priority: int = 100


RULES = (
    RuleSpec("DEMO1", "sofia.rossi", channel="facebook", priority=10),
    RuleSpec("DEMO2", "emma.diaz", channel="google_ads", priority=10),
    RuleSpec(None, "daniel.okafor", service_type="dedicated_team", priority=20),
)


@dataclass(frozen=True)
class SourceSpec:
    name: str
    kind: str
    store: str
    send_confirmation: bool = False
    default_service_type: str = ""


SOURCES = (
    SourceSpec("Downtown Facebook Lead Ads", "facebook", "DEMO1"),
    SourceSpec("Riverside Google Ads lead form", "google_ads", "DEMO2"),
    SourceSpec("Bayview Typeform trial form", "typeform", "DEMO3", send_confirmation=True),
    SourceSpec("Downtown Webflow site form", "webflow", "DEMO1", send_confirmation=True),
    SourceSpec("Riverside partner referrals", "generic", "DEMO2", default_service_type="diagnostic"),
)


def _secret(name: str) -> str:
    """A fixed secret per source (so reruns match): the Standard Webhooks form for the generic kind."""
    digest = hashlib.sha256(f"demo-office:{name}".encode()).digest()
    return "whsec_" + base64.b64encode(digest).decode()


@dataclass
class Staff:
    """What the activity needs of the fixed part: stores by tracking id, users by username, their profiles."""

    demo: object
    stores: dict[str, Store]
    users: dict[str, object]
    profiles: dict[str, RepProfile]
    rules: list[AssignmentRule]
    sources: list[InboundSource]
    mailboxes: dict[str, Mailbox]


def staff_load() -> Staff:
    User = get_user_model()
    groups = {group.name: group for group in Group.objects.filter(name__in=[SALES, OPERATIONS, MANAGERS])}
    demo, created = User.objects.get_or_create(
        username=DEMO_USERNAME, defaults={"is_staff": True, "is_superuser": True, "email": "demo@example.com"}
    )
    if created:
        demo.set_password(DEMO_PASSWORD)
        demo.save(update_fields=["password"])
    demo.groups.add(groups[SALES], groups[OPERATIONS])

    stores = {}
    for spec in STORES:
        stores[spec.tracking_id], _ = Store.objects.get_or_create(
            tracking_id=spec.tracking_id,
            defaults={"franchise": FRANCHISE, "name": spec.name, "account_id": spec.account_id,
                      "lead_email": spec.lead_email, "timezone": spec.timezone},
        )  # fmt: skip

    users = {DEMO_USERNAME: demo}
    for spec in STAFF:
        user, created = User.objects.get_or_create(
            username=spec.username,
            defaults={"first_name": spec.first_name, "last_name": spec.last_name, "is_staff": True,
                      "email": f"{spec.username}@example.com"},
        )  # fmt: skip
        if created:
            user.set_unusable_password()  # only the demo login signs in
            user.save(update_fields=["password"])
        user.groups.add(*(groups[name] for name in spec.groups))
        if spec.store:
            stores[spec.store].staff.add(user)
        users[spec.username] = user

    profiles = {}
    # The demo login takes shared-pool leads too, so its own work queue is not empty.
    reps = [(DEMO_USERNAME, WEEKDAYS, time(9, 0), time(17, 0), "", False, "America/New_York")]
    reps += [
        (s.username, list(s.work_days), s.work_start, s.work_end, s.manager, s.is_away,
         stores[s.store].timezone if s.store else "America/New_York")
        for s in STAFF if s.work_days is not None
    ]  # fmt: skip
    for username, days, start, end, manager, away, zone in reps:
        profiles[username], _ = RepProfile.objects.get_or_create(
            user=users[username],
            defaults={"manager": users.get(manager), "timezone": zone, "work_days": days, "work_start": start,
                      "work_end": end, "is_away": away},
        )  # fmt: skip

    rules = [
        AssignmentRule.objects.get_or_create(
            store=stores.get(rule.store), owner=users[rule.owner], service_type=rule.service_type,
            channel=rule.channel, defaults={"priority": rule.priority},
        )[0]
        for rule in RULES
    ]  # fmt: skip

    mailboxes = {}
    for spec in STORES:
        # Inactive: the host is made up, and an active mailbox is polled every few minutes.
        mailboxes[spec.tracking_id], _ = Mailbox.objects.get_or_create(
            name=f"{spec.slug}-leads",
            defaults={"host": "imap.example.com", "username": f"lead-tracking+{spec.tracking_id}@example.com",
                      "password_env_var": f"IMAP_PASSWORD_{spec.slug.upper()}", "is_active": False},
        )  # fmt: skip

    sources = []
    for spec in SOURCES:
        secrets = {"secret": _secret(spec.name)}
        if spec.kind == "facebook":
            secrets |= {"verify_token": "demo-verify-token", "access_token": "standin-page-access-token"}
        source, _ = InboundSource.objects.get_or_create(
            name=spec.name, kind=spec.kind, store=stores[spec.store],
            defaults={"send_confirmation": spec.send_confirmation,
                      "default_service_type": spec.default_service_type, **secrets},
        )  # fmt: skip
        sources.append(source)
    return Staff(demo=demo, stores=stores, users=users, profiles=profiles, rules=rules, sources=sources,
                 mailboxes=mailboxes)  # fmt: skip
