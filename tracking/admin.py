from django.contrib import admin

from tracking.models import Store


@admin.register(Store)
class StoreAdmin(admin.ModelAdmin):
    list_display = ("name", "franchise", "account_id", "tracking_id", "lead_email", "timezone", "is_active")
    list_filter = ("is_active", "franchise", "timezone")
    search_fields = ("name", "franchise", "account_id", "tracking_id", "lead_email", "=store_uuid")
    readonly_fields = ("created_at", "updated_at")
