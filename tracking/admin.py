import os

from django.contrib import admin
from django.utils import timezone
from django.utils.html import format_html

import jobs
from foundation.admin_actions import ReadOnlyAdminMixin
from foundation.admin_forms import AdminModelForm
from foundation.pagination import CappedCountPaginator
from stores.scoping import StoreListFilter, StoreScopedAdminMixin
from tracking.keys import POLL_KIND
from tracking.models import EmailLead, Mailbox


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
