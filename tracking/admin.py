import json
import os

from django.contrib import admin, messages
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from jobs.selectors import jobs_for_key_prefix
from tracking.models import EmailLead, Mailbox, Store, TrackedUser
from tracking.profile import crm_profile
from tracking.services import POLL_KIND
from tracking.sync import DELIVER_KIND, profile_deliveries_queue


@admin.register(Store)
class StoreAdmin(admin.ModelAdmin):
    list_display = ("name", "franchise", "account_id", "tracking_id", "lead_email", "timezone", "is_active")
    list_filter = ("is_active", "franchise", "timezone")
    search_fields = ("name", "franchise", "account_id", "tracking_id", "lead_email", "=store_uuid")
    readonly_fields = ("created_at", "updated_at")


@admin.register(Mailbox)
class MailboxAdmin(admin.ModelAdmin):
    list_display = ("name", "host", "port", "use_ssl", "username", "folder", "is_active", "password_set", "last_poll")
    list_filter = ("is_active",)
    search_fields = ("name", "host", "username")
    readonly_fields = ("created_at", "updated_at")

    @admin.display(description="password set", boolean=True)
    def password_set(self, obj):
        # What this process sees; the workers that poll must have the same variable.
        return bool(os.environ.get(obj.password_env_var))

    @admin.display(description="last poll")
    def last_poll(self, obj):
        job = jobs_for_key_prefix(f"{POLL_KIND}:{obj.name}:").order_by("-created_at").first()
        if job is None:
            return "—"
        return f"{job.status} ({timezone.localtime(job.created_at):%Y-%m-%d %H:%M})"


@admin.register(EmailLead)
class EmailLeadAdmin(admin.ModelAdmin):
    """Leads from lead-notification emails, read-only: what was parsed, and why a parse failed."""

    list_display = (
        "received_at", "lead_type", "first_name", "last_name", "phone", "store", "parse_state_badge", "is_forwarded",
    )  # fmt: skip
    list_filter = ("parse_state", "lead_type", "is_forwarded", "store", "received_at")
    search_fields = ("first_name", "last_name", "phone", "email", "email_from", "tracking_id", "email_subject")
    date_hierarchy = "received_at"
    list_select_related = ("store",)
    show_full_result_count = False
    fieldsets = (
        ("Lead", {"fields": ("lead_type", "first_name", "last_name", "phone", "email", "booked_date", "booked_time")}),
        ("Store", {"fields": ("store", "franchise", "account_id", "tracking_id")}),
        ("Parse", {"fields": ("parse_state", "parse_error", "dedup_key", "processed_by", "received_at", "synced_at")}),
        (
            "Email",
            {
                "fields": (
                    "email_subject",
                    "email_from",
                    "email_recipient",
                    "is_forwarded",
                    "forwarded_original_from",
                    "forwarded_original_to",
                    "forwarded_original_date",
                    "raw_body_display",
                )  # fmt: skip
            },
        ),
    )

    def get_readonly_fields(self, request, obj=None):
        return [field for fieldset in self.fieldsets for field in fieldset[1]["fields"]]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False  # what the email said is the record; staff edit leads under Leads

    def has_delete_permission(self, request, obj=None):
        return False

    @admin.display(description="parse state", ordering="parse_state")
    def parse_state_badge(self, obj):
        colour = "#ba2121" if obj.parse_state == EmailLead.ParseState.FAILED else "#2e7d32"
        return format_html('<b class="parse-{}" style="color:{}">{}</b>', obj.parse_state, colour, obj.parse_state)

    @admin.display(description="raw body")
    def raw_body_display(self, obj):
        return format_html('<pre style="white-space: pre-wrap">{}</pre>', obj.raw_body)


@admin.register(TrackedUser)
class TrackedUserAdmin(admin.ModelAdmin):
    """Signed-in docs and MCP users: what was captured, whether it is pending, what the CRM last received."""

    list_display = (
        "email", "sub", "company", "last_channel", "mcp_client", "tool_calls", "docs_views", "kapa_thread_count",
        "last_activity_at", "is_pending", "last_delivered_at",
    )  # fmt: skip
    list_filter = ("last_channel", "mcp_client", ("pending_since", admin.EmptyFieldListFilter), "last_activity_at")
    search_fields = ("=sub", "email", "company", "family_name")
    date_hierarchy = "last_activity_at"
    show_full_result_count = False
    actions = ["deliver_now"]
    fieldsets = (
        ("Identity", {"fields": ("sub", "email", "given_name", "family_name", "company", "signed_up_at",
                                 "last_sign_in_at", "last_channel", "last_activity_at")}),
        ("MCP", {"fields": ("mcp_client", "mcp_tool_counts", "mcp_last_tool_at", "mcp_agent_intents")}),
        ("Docs", {"fields": ("docs_recent_pages", "docs_page_counts", "docs_product_areas",
                             "docs_getting_started_visits", "docs_search_terms", "docs_last_active_at")}),
        ("Kapa", {"fields": ("kapa_thread_count", "kapa_last_interaction_at", "kapa_questions",
                             "kapa_competitor_mentions", "kapa_refreshed_at")}),
        ("CRM delivery", {"fields": ("pending_since", "last_delivered_at", "delivered_payload", "next_payload",
                                     "deliveries")}),
    )  # fmt: skip

    def get_readonly_fields(self, request, obj=None):
        return [field for fieldset in self.fieldsets for field in fieldset[1]["fields"]]

    def has_add_permission(self, request):
        return False  # users arrive by signing in

    def has_change_permission(self, request, obj=None):
        return False  # captured data is the record; the action below is how staff act on it

    @admin.display(description="tool calls")
    def tool_calls(self, obj):
        return sum(obj.mcp_tool_counts.values())

    @admin.display(description="docs views")
    def docs_views(self, obj):
        return sum(obj.docs_page_counts.values())

    @admin.display(description="pending", boolean=True, ordering="pending_since")
    def is_pending(self, obj):
        return obj.is_pending

    @admin.display(description="last delivered payload (redacted, as sent)")
    def delivered_payload(self, obj):
        return _json_block(obj.last_delivered_payload) if obj.last_delivered_payload else "never delivered"

    @admin.display(description="payload the next delivery would send (redacted)")
    def next_payload(self, obj):
        return _json_block(crm_profile(obj))

    @admin.display(description="delivery jobs")
    def deliveries(self, obj):
        rows = jobs_for_key_prefix(f"{DELIVER_KIND}:{obj.pk}:").order_by("-created_at")[:10]
        lines = format_html_join(
            "",
            '<li><a href="{}">{}</a> {} {}</li>',
            (
                (
                    reverse("admin:jobs_job_change", args=[job.pk]),
                    job.status,
                    timezone.localtime(job.created_at).strftime("%Y-%m-%d %H:%M"),
                    job.last_error[:120],
                )
                for job in rows
            ),
        )
        return format_html("<ul>{}</ul>", lines) if lines else "—"

    @admin.action(description="Deliver to the CRM now")
    def deliver_now(self, request, queryset):
        count = len(profile_deliveries_queue(user_ids=list(queryset.values_list("id", flat=True))))
        self.message_user(request, f"Queued {count} profile deliver{'y' if count == 1 else 'ies'}.", messages.SUCCESS)


def _json_block(value) -> str:
    return format_html('<pre style="white-space: pre-wrap">{}</pre>', json.dumps(value, indent=2, sort_keys=True))
