from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand
from django.db import transaction

from config.staff_groups import OPERATIONS, SALES
from leadgen.models import Lead
from stores.models import Store
from tracking import activity
from tracking.models import TrackedUser

DEMO_USERNAME = "demo"
DEMO_PASSWORD = "demo-password"

DEMO_LEADS = [
    {
        "first_name": "Ada", "last_name": "Lovelace", "email": "ada@example.com", "company": "Analytical Engines",
        "service_type": Lead.ServiceType.DIAGNOSTIC, "message": "We want a quick diagnostic of our sales ops.",
        "source_page": "https://example.com/services/diagnostic",
    },
    {
        "first_name": "Grace", "last_name": "Hopper", "email": "grace@example.com", "company": "Compilers Inc",
        "service_type": Lead.ServiceType.PROCESS_AUTOMATION, "phone": "+14155550100",
        "message": "Automate our quote-to-cash process.", "source_page": "https://example.com/automation",
    },
    {
        "first_name": "Bulk", "last_name": "Seller", "email": "offers@example.net", "company": "Links4U",
        "message": "We sell backlinks and SEO packages.", "status": Lead.Status.VENDOR,
        "category": Lead.Status.VENDOR, "classified_by": Lead.Classifier.RULES, "confidence": 0.9,
        "reasoning": "Vendor pitch phrases.",
    },
]  # fmt: skip


class Command(BaseCommand):
    help = "Load demo data for `make run`: a store, a few leads, a tracked docs user and a staff login. Safe to rerun."

    @transaction.atomic
    def handle(self, *args, **options):
        Store.objects.get_or_create(
            tracking_id="DEMO1",
            defaults={
                "franchise": "Demo Fitness",
                "name": "Demo Fitness — Downtown",
                "account_id": "acct-demo",
                "lead_email": "leads-demo@example.com",
                "timezone": "America/New_York",
            },
        )
        for fields in DEMO_LEADS:
            Lead.objects.get_or_create(email=fields["email"], defaults=fields)
        if not TrackedUser.objects.filter(sub="auth0|demo-ada").exists():
            # A docs reader who also uses the MCP server: pending, so the first daily sync delivers her.
            activity.tracked_user_sign_in(
                sub="auth0|demo-ada", channel="docs-login", email="ada@analytical-engines.example", given_name="Ada"
            )
            activity.docs_page_view_record(sub="auth0|demo-ada", path="/current/get-started/", component="redpanda")
            activity.mcp_tool_call_record(
                sub="auth0|demo-ada", tool="search_docs", user_agent="claude-code/1.0", context="size a 3-node cluster"
            )

        user, created = get_user_model().objects.get_or_create(
            username=DEMO_USERNAME, defaults={"is_staff": True, "is_superuser": True, "email": "demo@example.com"}
        )
        if created:
            user.set_password(DEMO_PASSWORD)
            user.save()
        user.groups.add(*Group.objects.filter(name__in=[SALES, OPERATIONS]))
        self.stdout.write(f"Demo login: {DEMO_USERNAME} / {DEMO_PASSWORD}")
