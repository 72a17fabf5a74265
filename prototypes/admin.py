from django.conf import settings
from django.contrib import admin, messages
from django.utils import timezone
from django.utils.html import format_html
from django.utils.timesince import timesince

from prototypes import services
from prototypes.models import Prototype, PrototypeEvent
from stores.scoping import StoreScopedAdminMixin


class PrototypeEventInline(admin.TabularInline):
    model = PrototypeEvent
    fields = ("number", "kind", "data", "created_at")
    readonly_fields = fields
    extra = 0
    can_delete = False
    ordering = ("-number",)
    max_num = 0

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Prototype)
class PrototypeAdmin(StoreScopedAdminMixin, admin.ModelAdmin):
    # Staff assigned to stores see the prototypes of their stores' leads only.
    store_path = "lead__store"
    list_display = ("lead", "state", "time_in_state", "title", "preview", "continue_attempts", "recovery_attempts",
                    "last_checked_at", "created_at")  # fmt: skip
    list_filter = ("state", "created_at")
    search_fields = ("lead__email", "lead__first_name", "lead__last_name", "lead__company", "chat_id")
    list_select_related = ("lead",)
    list_per_page = 100
    show_full_result_count = False
    date_hierarchy = "created_at"
    actions = ["retry", "cancel"]
    inlines = [PrototypeEventInline]
    fields = ("lead", "state", "time_in_state", "v0_chat", "message_id", "title", "preview", "continue_attempts",
              "recovery_attempts", "started_at", "generating_since", "last_checked_at", "finished_at", "last_error",
              "created_at")  # fmt: skip
    readonly_fields = fields

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    @admin.display(description="in state for", ordering="state_changed_at")
    def time_in_state(self, obj):
        return timesince(obj.state_changed_at, timezone.now())

    @admin.display(description="V0 chat")
    def v0_chat(self, obj):
        if not obj.chat_id:
            return "none yet"
        return format_html('<a href="{}{}" target="_blank" rel="noopener">{}</a>', settings.V0_CHAT_WEB_URL,
                           obj.chat_id, obj.chat_id)  # fmt: skip

    @admin.display(description="preview")
    def preview(self, obj):
        if not obj.preview_url:
            return "-"
        return format_html('<a href="{}" target="_blank" rel="noopener">open</a>', obj.preview_url)

    @admin.action(description="Retry selected failed prototypes", permissions=["change"])
    def retry(self, request, queryset):
        actor = request.user.get_username()
        done = sum(
            services.prototype_retry(prototype_id=pk, actor=actor) for pk in queryset.values_list("pk", flat=True)
        )
        self.message_user(request, f"Retrying {done} prototype(s); the others had not failed.", messages.SUCCESS)

    @admin.action(description="Cancel selected prototypes (drops the visitor's hold)", permissions=["change"])
    def cancel(self, request, queryset):
        actor = request.user.get_username()
        done = sum(
            services.prototype_cancel(prototype_id=pk, actor=actor) for pk in queryset.values_list("pk", flat=True)
        )
        self.message_user(request, f"Cancelled {done} prototype(s); the others had already ended.", messages.SUCCESS)
