from django.contrib import admin

from leadgen.models import Lead


@admin.register(Lead)
class LeadAdmin(admin.ModelAdmin):
    list_display = ("id", "first_name", "last_name", "email", "company", "service_type", "status", "created_at")
    list_filter = ("status", "channel", "service_type", "pipedrive_state", "created_at")
    search_fields = ("email", "first_name", "last_name", "company")
    date_hierarchy = "created_at"
    readonly_fields = ("created_at", "updated_at")

    def has_delete_permission(self, request, obj=None):
        return False
