import json
from urllib.parse import urlencode

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

import jobs
from crm.redaction import redact
from docs_users.models import TrackedUser
from docs_users.profile import crm_profile
from docs_users.selectors import mcp_clients_seen
from docs_users.sync import DELIVER_KIND, profile_deliveries_queue


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
        clients = path("mcp-clients/", self.admin_site.admin_view(self.mcp_clients_view), name="docs_users_mcp_clients")
        return [clients, *super().get_urls()]

    def mcp_clients_view(self, request):
        """The MCP clients seen, each linking to its users."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        changelist = reverse("admin:docs_users_trackeduser_changelist")
        rows = [{**row, "users_url": f"{changelist}?{urlencode({'mcp_client': row['mcp_client']})}"}
                for row in mcp_clients_seen()]  # fmt: skip
        context = {**self.admin_site.each_context(request), "title": "MCP clients seen", "rows": rows}
        context["opts"] = self.opts
        return TemplateResponse(request, "admin/docs_users/trackeduser/mcp_clients.html", context)

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
        return request.user.has_perm("docs_users.deliver_trackeduser")

    @admin.action(description="Deliver to the CRM now", permissions=["deliver"])
    def deliver_now(self, request, queryset):
        count = len(profile_deliveries_queue(user_ids=list(queryset.values_list("id", flat=True))))
        self.message_user(request, f"Queued {count} profile deliver{'y' if count == 1 else 'ies'}.", messages.SUCCESS)


def _json_block(value) -> str:
    return format_html('<pre style="white-space: pre-wrap">{}</pre>', json.dumps(value, indent=2, sort_keys=True))
