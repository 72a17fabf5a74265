from django.contrib import admin, messages
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from import_export import resources
from import_export.admin import ExportMixin

from chat import selectors as chat_selectors
from foundation.exports import SafeCSV
from foundation.pagination import CappedCountPaginator
from leadgen import selectors, services
from leadgen.models import Lead
from stores.scoping import StoreListFilter, StoreScopedAdminMixin


class LeadResource(resources.ModelResource):
    class Meta:
        model = Lead
        fields = (
            "id", "created_at", "channel", "status", "category", "confidence", "classified_by", "first_name",
            "last_name", "email", "phone", "company", "service_type", "source_page", "pipedrive_state",
            "pipedrive_lead_id",
        )  # fmt: skip
        export_order = fields


@admin.register(Lead)
class LeadAdmin(StoreScopedAdminMixin, ExportMixin, admin.ModelAdmin):
    resource_classes = [LeadResource]
    export_formats = [SafeCSV]
    list_display = (
        "id", "created_at", "full_name", "email", "company", "service_type", "status", "category",
        "pipedrive_state",
    )  # fmt: skip
    list_filter = (
        "status", "category", "service_type", "pipedrive_state", "channel", ("store", StoreListFilter), "created_at",
    )  # fmt: skip
    search_fields = ("email", "first_name", "last_name", "company")
    date_hierarchy = "created_at"
    ordering = ("-created_at", "-pk")
    list_per_page = 100
    paginator = CappedCountPaginator
    show_full_result_count = False
    actions = ["reclassify", "resync_pipedrive"]
    fieldsets = (
        ("Contact", {"fields": ("first_name", "last_name", "email", "phone", "company")}),
        ("Request", {"fields": ("channel", "service_type", "message", "steps", "source_page", "utm", "client_ip")}),
        ("Consent", {"fields": ("consent_version", "consent_text", "consented_at")}),
        ("Classification", {"fields": ("status", "category", "confidence", "classified_by", "reasoning")}),
        ("Pipedrive", {"fields": ("pipedrive_state", "pipedrive_person_id", "pipedrive_org_id", "pipedrive_lead_id")}),
        ("Prototype", {"fields": ("preview_url", "prototype_summary")}),
        ("Sales chat", {"fields": ("chat_conversation",)}),
        ("Jobs", {"fields": ("jobs_table",)}),
        ("Record", {"fields": ("created_at", "updated_at")}),
    )
    readonly_fields = (
        "channel", "client_ip", "category", "confidence", "classified_by", "reasoning", "pipedrive_state",
        "pipedrive_person_id", "pipedrive_org_id", "pipedrive_lead_id", "jobs_table", "chat_conversation", "created_at",
        "updated_at", "prototype_summary", "consent_version", "consent_text", "consented_at",
    )  # fmt: skip

    def has_delete_permission(self, request, obj=None):
        return False  # a dropped lead is lost money: mark it spam instead

    def has_export_permission(self, request):
        return self.has_view_permission(request)

    @admin.display(description="name", ordering="last_name")
    def full_name(self, obj):
        return obj.full_name

    @admin.display(description="AI prototype")
    def prototype_summary(self, obj):
        prototype = selectors.lead_prototype(lead=obj)
        if prototype is None:
            return "none"
        return format_html(
            '<a href="{}">{}</a>', reverse("admin:prototypes_prototype_change", args=[prototype.pk]),
            prototype.get_state_display(),
        )  # fmt: skip

    @admin.display(description="conversation")
    def chat_conversation(self, obj):
        return render_to_string(
            "chat/admin/lead_conversation.html", {"sessions": chat_selectors.chat_sessions_of_lead(lead_id=obj.pk)}
        )

    @admin.display(description="jobs this lead set off")
    def jobs_table(self, obj):
        rows = [
            (reverse("admin:jobs_job_change", args=[job.pk]), job.kind, job.status, job.attempts, job.run_after)
            for job in selectors.lead_jobs(lead=obj)
        ]
        if not rows:
            return "none"
        return format_html(
            "<table><tr><th>job</th><th>status</th><th>attempts</th><th>run after</th></tr>{}</table>",
            format_html_join("", '<tr><td><a href="{}">{}</a></td><td>{}</td><td>{}</td><td>{}</td></tr>', rows),
        )

    @admin.action(description="Reclassify selected leads", permissions=["change"])
    def reclassify(self, request, queryset):
        changed = 0
        for lead in queryset:
            old, new = services.lead_reclassify(lead=lead)
            changed += old != new
        self.message_user(
            request, f"Reclassified {queryset.count()} lead(s); {changed} changed status.", messages.SUCCESS
        )

    @admin.action(description="Resync selected leads to Pipedrive", permissions=["change"])
    def resync_pipedrive(self, request, queryset):
        queued = sum(services.lead_resync_pipedrive(lead=lead, actor=request.user.get_username()) for lead in queryset)
        self.message_user(
            request,
            f"Queued {queued} lead(s) for Pipedrive; the others are already synced or not leads.",
            messages.SUCCESS,
        )
