from django.db import migrations

from foundation.staff_groups import OPERATIONS, SALES, grant


def grant_tracked_users(apps, schema_editor):
    # View is what both need: the list, the payload preview and "deliver now". Nobody edits captured data.
    grant(apps, SALES, "tracking", {"trackeduser": ["view"]})
    grant(apps, OPERATIONS, "tracking", {"trackeduser": ["view"]})


class Migration(migrations.Migration):
    dependencies = [("tracking", "0005_trackeduser"), ("jobs", "0002_operations_group")]

    operations = [migrations.RunPython(grant_tracked_users, migrations.RunPython.noop)]
