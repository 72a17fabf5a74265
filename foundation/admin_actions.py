"""Every admin action checks a permission, the libraries' own included; every CSV export escapes formulae;
records nobody may add, change or delete in the admin say so in one place (ReadOnlyAdminMixin).

Django runs an action for anyone who can see the change list unless the action
names `allowed_permissions`. Our actions name theirs; django-celery-beat's
(enable, disable, toggle, run now) and django-axes' (clean up) name none, so a
view-only user could run a periodic task. Those get "change" here, after every
admin module is loaded. Likewise an admin that exports django-import-export's
plain CSV gets foundation.exports.SafeCSV instead.
"""

from django.contrib import admin
from import_export.formats.base_formats import CSV

from foundation.exports import SafeCSV


class ReadOnlyAdminMixin:
    """A ModelAdmin whose rows are records: shown, never added, changed or deleted there."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


def admin_actions_require_permissions(site=admin.site) -> None:
    for model_admin in site._registry.values():
        for function, _, _ in model_admin._get_base_actions():
            if not getattr(function, "allowed_permissions", None):
                function.allowed_permissions = ("change",)


def admin_exports_escape_formulae(site=admin.site) -> None:
    for model_admin in site._registry.values():
        formats = getattr(model_admin, "export_formats", None)
        if formats:
            model_admin.export_formats = [SafeCSV if fmt is CSV else fmt for fmt in formats]
