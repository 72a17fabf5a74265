from django import forms
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin

from stores.models import Store
from stores.scoping import StoreScopedAdminMixin

# The fields of a user that widen what they may see: only a superuser changes them (below).
_ACCESS_FIELDS = ("is_staff", "is_superuser", "groups", "user_permissions")


class StoreForm(forms.ModelForm):
    """A store's change form; whoever fills it cannot add themselves to, or remove themselves from, its staff."""

    editor = None  # the requesting user, set by StoreAdmin.get_form

    class Meta:
        model = Store
        fields = (
            "franchise", "name", "account_id", "store_uuid", "lead_email", "tracking_id", "timezone",
            "quiet_hours_start", "quiet_hours_end", "reassign_overdue", "is_active", "staff",
        )  # fmt: skip

    def clean_staff(self):
        staff = self.cleaned_data["staff"]
        before = self.instance.pk is not None and self.instance.staff.filter(pk=self.editor.pk).exists()
        if staff.filter(pk=self.editor.pk).exists() != before:
            raise forms.ValidationError("You cannot change your own store assignments; ask another manager.")
        return staff


@admin.register(Store)
class StoreAdmin(StoreScopedAdminMixin, admin.ModelAdmin):
    store_path = "pk"
    form = StoreForm
    list_display = ("name", "franchise", "account_id", "tracking_id", "lead_email", "timezone", "is_active")
    list_filter = ("is_active", "franchise", "timezone")
    search_fields = ("name", "franchise", "account_id", "tracking_id", "lead_email", "=store_uuid")
    ordering = ("franchise", "name")
    readonly_fields = ("created_at", "updated_at")
    filter_horizontal = ("staff",)

    def get_form(self, request, obj=None, change=False, **kwargs):
        form = super().get_form(request, obj, change, **kwargs)
        form.editor = request.user
        return form

    def formfield_for_manytomany(self, db_field, request, **kwargs):
        if db_field.name == "staff":
            kwargs["queryset"] = get_user_model().objects.filter(is_staff=True, is_active=True).order_by("username")
        return super().formfield_for_manytomany(db_field, request, **kwargs)


User = get_user_model()
admin.site.unregister(User)


@admin.register(User)
class StaffUserAdmin(UserAdmin):
    """Django's user admin, except that only a superuser grants access: the stock one lets anyone holding
    "change user" give themselves any group or permission, the every-store permission included."""

    def get_readonly_fields(self, request, obj=None):
        readonly = super().get_readonly_fields(request, obj)
        return readonly if request.user.is_superuser else (*readonly, *_ACCESS_FIELDS)
