import json

from django.contrib import admin, messages
from django.http import HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html
from import_export import resources
from import_export.admin import ExportMixin

from foundation.exports import SafeCSV
from foundation.pagination import CappedCountPaginator
from jobs import services
from jobs.models import Job, JobAttempt
from jobs.registry import registered_kinds
from stores.scoping import StoreListFilter, StoreScopedAdminMixin, sees_every_store


class JobResource(resources.ModelResource):
    class Meta:
        model = Job
        fields = (
            "id", "kind", "key", "store", "status", "attempts", "max_attempts", "run_after",
            "last_error", "created_at", "finished_at",
        )  # fmt: skip
        export_order = fields


class JobAttemptInline(admin.TabularInline):
    model = JobAttempt
    extra = 0
    can_delete = False
    fields = ("number", "outcome", "started_at", "finished_at", "duration_ms", "error")
    readonly_fields = fields

    def has_add_permission(self, request, obj=None):
        return False


def _confirmed_bulk_action(modeladmin, request, queryset, *, title, verb, perform):
    """Show a confirmation page first, like Django's own delete action; act on the POST back."""
    if request.POST.get("confirmed") == "yes":
        count = perform(job_ids=list(queryset.values_list("pk", flat=True)), actor=request.user.get_username())
        modeladmin.message_user(request, f"{verb} {count} job(s).", messages.SUCCESS)
        return None
    context = {
        **modeladmin.admin_site.each_context(request),
        "title": title,
        "verb": verb,
        "jobs": queryset,
        "action": request.POST["action"],
        "opts": modeladmin.model._meta,
        "action_checkbox_name": admin.helpers.ACTION_CHECKBOX_NAME,
    }
    return TemplateResponse(request, "admin/jobs/job/confirm_action.html", context)


class KindFilter(admin.SimpleListFilter):
    """The registered kinds; the stock filter would read DISTINCT kind over every job (0.7 s on 1,000,000)."""

    title = "kind"
    parameter_name = "kind__exact"

    def lookups(self, request, model_admin):
        return [(kind, kind) for kind in registered_kinds()]

    def queryset(self, request, queryset):
        return queryset.filter(kind=self.value()) if self.value() else queryset


@admin.register(Job)
class JobAdmin(StoreScopedAdminMixin, ExportMixin, admin.ModelAdmin):
    """Store-scoped like every store's rows: a store's staff see, replay and discard its jobs only; jobs of
    no store (sync, retention, polls, test jobs, leads not matched to a store) are for staff who see every store."""

    resource_classes = [JobResource]
    export_formats = [SafeCSV]
    # import-export wraps `change_list_template` as the base of its own; ours extends its
    # export template instead, so it must take the import-export slot (else: extends loop).
    import_export_change_list_template = "admin/jobs/job/change_list.html"
    list_display = (
        "id", "kind", "key", "store", "status_badge", "attempts_display", "run_after", "created_at", "short_error",
    )  # fmt: skip
    list_select_related = ("store",)
    list_filter = ("status", KindFilter, ("store", StoreListFilter), "created_at", "run_after")
    search_fields = ("=id", "key")
    # No date_hierarchy: its year links read DISTINCT over every job (1.6 s on 1,000,000); the created
    # filter above narrows by date without reading the table.
    ordering = ("-created_at",)
    show_full_result_count = False
    list_per_page = 100
    paginator = CappedCountPaginator
    inlines = [JobAttemptInline]
    actions = ["replay", "discard"]
    readonly_fields = (
        "kind", "key", "store", "pretty_payload", "status", "attempts", "max_attempts", "run_after", "started_at",
        "lease_expires_at", "dispatched_at", "last_error", "created_at", "updated_at", "finished_at",
    )  # fmt: skip
    exclude = ("payload",)

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False  # the row is the record: discard instead

    def has_export_permission(self, request):
        # import-export lets any staff user export unless IMPORT_EXPORT_EXPORT_PERMISSION_CODE is set.
        return self.has_view_permission(request)

    @admin.display(description="payload")
    def pretty_payload(self, obj):
        return format_html("<pre>{}</pre>", json.dumps(obj.payload, indent=2, sort_keys=True))

    @admin.display(description="status", ordering="status")
    def status_badge(self, obj):
        colours = {"dead": "#ba2121", "running": "#205493", "pending": "#8a6d3b", "skipped": "#666"}
        return format_html('<b style="color:{}">{}</b>', colours.get(obj.status, "#2e7d32"), obj.status)

    @admin.display(description="attempts", ordering="attempts")
    def attempts_display(self, obj):
        return f"{obj.attempts}/{obj.max_attempts}"

    @admin.display(description="last error")
    def short_error(self, obj):
        return obj.last_error.strip().splitlines()[-1][:120] if obj.last_error.strip() else ""

    @admin.action(description="Replay selected dead or skipped jobs", permissions=["change"])
    def replay(self, request, queryset):
        return _confirmed_bulk_action(
            self, request, queryset, title="Replay jobs?", verb="Replayed", perform=services.jobs_replay
        )

    @admin.action(description="Discard selected pending or dead jobs", permissions=["change"])
    def discard(self, request, queryset):
        return _confirmed_bulk_action(
            self, request, queryset, title="Discard jobs?", verb="Discarded", perform=services.jobs_discard
        )

    def _can_send_test_job(self, request) -> bool:
        # The test job belongs to no store: only who can see it afterwards may send one.
        return self.has_change_permission(request) and sees_every_store(request.user)

    def changelist_view(self, request, extra_context=None):
        extra_context = {**(extra_context or {}), "can_send_test_job": self._can_send_test_job(request)}
        return super().changelist_view(request, extra_context)

    def get_urls(self):
        send_test = self.admin_site.admin_view(self.send_test_job_view)
        return [path("send-test-job/", send_test, name="jobs_job_send_test")] + super().get_urls()

    def send_test_job_view(self, request):
        """Operators check the worker pipeline end to end: the ping job should succeed within seconds."""
        if request.method != "POST" or not self._can_send_test_job(request):
            return HttpResponseRedirect(reverse("admin:jobs_job_changelist"))
        job = services.job_send_test(actor=request.user.get_username())
        self.message_user(request, f"Test job #{job.pk} sent; refresh to see it succeed.", messages.SUCCESS)
        return HttpResponseRedirect(reverse("admin:jobs_job_change", args=[job.pk]))
