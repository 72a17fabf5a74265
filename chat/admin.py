from django.contrib import admin
from django.db.models import Count
from django.urls import reverse
from django.utils.html import format_html

from chat.models import ChatMessage, ChatSession
from stores.scoping import StoreScopedAdminMixin


class ChatMessageInline(admin.TabularInline):
    """The transcript, read-only: what was said is a record, not something staff edit."""

    model = ChatMessage
    fields = ("created_at", "role", "content", "state", "metadata")
    readonly_fields = fields
    extra = 0
    can_delete = False
    ordering = ("created_at", "id")

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(ChatSession)
class ChatSessionAdmin(StoreScopedAdminMixin, admin.ModelAdmin):
    # Staff assigned to stores see the conversations of their stores' leads only.
    store_path = "lead__store"
    list_display = ("session_id", "first_seen_at", "last_seen_at", "message_count", "lead_link")
    list_filter = ("last_seen_at",)
    # Content search goes through the messages: `distinct` keeps one row per session.
    search_fields = ("=session_id", "messages__content")
    date_hierarchy = "last_seen_at"
    ordering = ("-last_seen_at",)
    list_per_page = 50
    show_full_result_count = False
    fields = ("session_id", "client_ip", "first_seen_at", "last_seen_at", "lead_link")
    readonly_fields = fields
    inlines = [ChatMessageInline]

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("lead").annotate(message_total=Count("messages"))

    def has_add_permission(self, request):
        return False  # sessions are started by visitors

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return request.user.is_superuser  # retention deletes transcripts; staff only read them

    @admin.display(description="messages", ordering="message_total")
    def message_count(self, obj):
        return obj.message_total

    @admin.display(description="lead")
    def lead_link(self, obj):
        if obj.lead_id is None:
            return "—"
        return format_html('<a href="{}">{}</a>', reverse("admin:leadgen_lead_change", args=[obj.lead_id]), obj.lead)
