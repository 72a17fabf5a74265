# Tracked docs/MCP users belong to no store: like every row of no store, they are for staff who see
# every store (the Managers group), not for the staff of one store.

from django.db import migrations

from foundation.staff_groups import MANAGERS, OPERATIONS, SALES, grant


def managers_only(apps, schema_editor):
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    view = Permission.objects.filter(content_type__app_label="tracking", codename="view_trackeduser")
    for group in Group.objects.filter(name__in=[SALES, OPERATIONS]):
        group.permissions.remove(*view)
    grant(apps, MANAGERS, "tracking", {"trackeduser": ["view"]})


def groups_again(apps, schema_editor):
    grant(apps, SALES, "tracking", {"trackeduser": ["view"]})
    grant(apps, OPERATIONS, "tracking", {"trackeduser": ["view"]})


class Migration(migrations.Migration):
    dependencies = [("tracking", "0010_trackeduser_kapa_asked"), ("stores", "0003_view_all_stores")]

    operations = [migrations.RunPython(managers_only, groups_again)]
