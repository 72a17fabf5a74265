import json
import os
from urllib.parse import urlencode

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

import jobs
from crm.redaction import redact
from foundation.admin_actions import ReadOnlyAdminMixin
from foundation.admin_forms import AdminModelForm
from foundation.pagination import CappedCountPaginator
from stores.scoping import StoreListFilter, StoreScopedAdminMixin
from tracking.models import EmailLead, Mailbox, TrackedUser
from tracking.profile import crm_profile
from tracking.selectors import mcp_clients_seen
from tracking.services import POLL_KIND
from tracking.sync import DELIVER_KIND, profile_deliveries_queue


@admin.register(Mailbox)
class MailboxAdmin(admin.ModelAdmin):
    list_display = ("name", "host", "port", "use_ssl", "username", "folder", "is_active", "password_set", "last_poll")
    list_filter = ("is_active",)
    search_fields = ("name", "host", "username")
    readonly_fields = ("created_at", "updated_at")
    # Mailbox.clean() checks the host, read-only for operations: its error must reach them as a form error.
    form = AdminModelForm
    # Where a login goes and which password it sends: superusers only (operations may pause a mailbox or
    # change its folder).
    CONNECTION_FIELDS = ("host", "port", "use_ssl", "username", "password_env_var")

    def has_add_permission(self, request):
        return request.user.is_superuser

    def get_readonly_fields(self, request, obj=None):
        if request.user.is_superuser:
            return self.readonly_fields
        return self.readonly_fields + self.CONNECTION_FIELDS

    @admin.display(description="password set", boolean=True)
    def password_set(self, obj):
        # What this process sees; the workers that poll must have the same variable.
        return bool(os.environ.get(obj.password_env_var))

    @admin.display(description="last poll")
    def last_poll(self, obj):
        job = jobs.jobs_with_key_prefix(f"{POLL_KIND}:{obj.name}:").order_by("-created_at").first()
        if job is None:
            return "—"
        return f"{job.status} ({timezone.localtime(job.created_at):%Y-%m-%d %H:%M})"


@admin.register(EmailLead)
class EmailLeadAdmin(StoreScopedAdminMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    """Leads from lead-notification emails, read-only: what was parsed, and why a parse failed."""

    list_display = (
        "received_at", "lead_type", "first_name", "last_name", "phone", "store", "parse_state_badge", "is_forwarded",
    )  # fmt: skip
    list_filter = ("parse_state", "lead_type", "is_forwarded", ("store", StoreListFilter), "received_at")
    search_fields = ("first_name", "last_name", "phone", "email", "email_from", "tracking_id", "email_subject")
    date_hierarchy = "received_at"
    ordering = ("-received_at", "-pk")
    paginator = CappedCountPaginator
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
        ("MCP", {"fields": ("mcp_client", "mcp_tools", "mcp_last_tool_at", "mcp_recent_contexts")}),
        ("Docs", {"fields": ("docs_recent_pages", "docs_page_counts", "docs_product_areas",
                             "docs_getting_started_visits", "docs_search_terms", "docs_last_active_at")}),
        ("Kapa", {"fields": ("kapa_thread_count", "kapa_last_interaction_at", "kapa_questions",
                             "kapa_competitor_mentions", "kapa_refreshed_at", "kapa_asked_thread_count",
                             "kapa_asked_questions")}),
        ("CRM delivery", {"fields": ("pending_since", "last_delivered_at", "delivered_payload", "next_payload",
                                     "deliveries")}),
    )  # fmt: skip

    def get_readonly_fields(self, request, obj=None):
        return [field for fieldset in self.fieldsets for field in fieldset[1]["fields"]]

    def has_add_permission(self, request):
        return False  # users arrive by signing in

    def has_change_permission(self, request, obj=None):
        return False  # captured data is the record; the action below is how staff act on it

    def get_urls(self):
        clients = path("mcp-clients/", self.admin_site.admin_view(self.mcp_clients_view), name="tracking_mcp_clients")
        return [clients, *super().get_urls()]

    def mcp_clients_view(self, request):
        """The MCP clients seen, each linking to its users."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        changelist = reverse("admin:tracking_trackeduser_changelist")
        rows = [{**row, "users_url": f"{changelist}?{urlencode({'mcp_client': row['mcp_client']})}"}
                for row in mcp_clients_seen()]  # fmt: skip
        context = {**self.admin_site.each_context(request), "title": "MCP clients seen", "rows": rows}
        context["opts"] = self.opts
        return TemplateResponse(request, "admin/tracking/trackeduser/mcp_clients.html", context)

    @admin.display(description="MCP tools (calls)")
    def mcp_tools(self, obj):
        counts = sorted(obj.mcp_tool_counts.items(), key=lambda item: (-item[1], item[0]))
        rows = format_html_join("", "<tr><td>{}</td><td>{}</td></tr>", counts)
        return format_html("<table><tr><th>tool</th><th>calls</th></tr>{}</table>", rows) if counts else "—"

    @admin.display(description="recent agent contexts (redacted)")
    def mcp_recent_contexts(self, obj):
        rows = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
            ((entry.get("at", "")[:16].replace("T", " "), entry.get("tool", ""), redact(entry.get("context", "")))
             for entry in obj.mcp_agent_intents),
        )  # fmt: skip
        return format_html("<table><tr><th>at</th><th>tool</th><th>context</th></tr>{}</table>", rows) if rows else "—"

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
        rows = jobs.jobs_with_key_prefix(f"{DELIVER_KIND}:{obj.pk}:").order_by("-created_at")[:10]
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

    def has_deliver_permission(self, request):
        return request.user.has_perm("tracking.deliver_trackeduser")

    @admin.action(description="Deliver to the CRM now", permissions=["deliver"])
    def deliver_now(self, request, queryset):
        count = len(profile_deliveries_queue(user_ids=list(queryset.values_list("id", flat=True))))
        self.message_user(request, f"Queued {count} profile deliver{'y' if count == 1 else 'ies'}.", messages.SUCCESS)


def _json_block(value) -> str:
    return format_html('<pre style="white-space: pre-wrap">{}</pre>', json.dumps(value, indent=2, sort_keys=True))
