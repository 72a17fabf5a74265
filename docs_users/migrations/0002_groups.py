# What the staff groups hold of the tracked users, granted here as each app grants its own: the users belong to
# no store, so viewing them is for the Managers group; Operations acts on deliveries.

from django.db import migrations

from foundation.staff_groups import MANAGERS, OPERATIONS, grant


def grant_tracked_users(apps, schema_editor):
    grant(apps, MANAGERS, "docs_users", {"trackeduser": ["view"]})
    grant(apps, OPERATIONS, "docs_users", {"trackeduser": ["deliver"]})


class Migration(migrations.Migration):
    dependencies = [("docs_users", "0001_initial"), ("jobs", "0002_operations_group")]

    operations = [migrations.RunPython(grant_tracked_users, migrations.RunPython.noop)]
