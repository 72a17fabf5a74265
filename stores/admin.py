from django.contrib import admin

from stores.models import Store
from stores.scoping import StoreScopedAdminMixin


@admin.register(Store)
class StoreAdmin(StoreScopedAdminMixin, admin.ModelAdmin):
    store_path = "pk"
    list_display = ("name", "franchise", "account_id", "tracking_id", "lead_email", "timezone", "is_active")
    list_filter = ("is_active", "franchise", "timezone")
    search_fields = ("name", "franchise", "account_id", "tracking_id", "lead_email", "=store_uuid")
    ordering = ("franchise", "name")
    readonly_fields = ("created_at", "updated_at")
    filter_horizontal = ("staff",)
