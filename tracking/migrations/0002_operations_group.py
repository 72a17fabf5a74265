from django.db import migrations

from foundation.staff_groups import OPERATIONS, SALES, grant


def grant_stores(apps, schema_editor):
    grant(apps, OPERATIONS, "tracking", {"store": ["view", "add", "change"]})
    grant(apps, SALES, "tracking", {"store": ["view"]})


class Migration(migrations.Migration):
    dependencies = [("tracking", "0001_initial"), ("jobs", "0002_operations_group")]

    operations = [migrations.RunPython(grant_stores, migrations.RunPython.noop)]
