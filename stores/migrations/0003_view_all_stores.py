# Store scoping fails closed from here on: a staff user with no store used to see every store. Those
# users (today's managers) keep that view through the new explicit permission, held by the Managers group.

from django.conf import settings
from django.db import migrations, models

from foundation.staff_groups import MANAGERS, grant, revoke_group


def managers_group(apps, schema_editor):
    grant(apps, MANAGERS, "stores", {"store": ["view"]})
    Permission = apps.get_model("auth", "Permission")
    Group = apps.get_model("auth", "Group")
    managers = Group.objects.get(name=MANAGERS)
    managers.permissions.add(Permission.objects.get(content_type__app_label="stores", codename="view_all_stores"))
    User = apps.get_model(*settings.AUTH_USER_MODEL.split("."))
    unassigned = User.objects.filter(is_staff=True, is_superuser=False, stores__isnull=True)
    managers.user_set.add(*unassigned)


def no_managers_group(apps, schema_editor):
    revoke_group(apps, MANAGERS)


class Migration(migrations.Migration):
    dependencies = [("stores", "0002_groups"), migrations.swappable_dependency(settings.AUTH_USER_MODEL)]

    operations = [
        migrations.AlterModelOptions(
            name="store",
            options={"ordering": ["franchise", "name"], "permissions": [("view_all_stores", "Can see every store")]},
        ),
        migrations.AlterField(
            model_name="store",
            name="staff",
            field=models.ManyToManyField(
                blank=True,
                db_table="stores_store_staff",
                help_text="Staff who work this store. Staff see only their stores' rows; seeing every store is the "
                "“Can see every store” permission (the Managers group).",
                related_name="stores",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.RunPython(managers_group, no_managers_group),
    ]
