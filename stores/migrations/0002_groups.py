from django.db import migrations

from foundation.staff_groups import OPERATIONS, SALES, grant


def grant_stores(apps, schema_editor):
    # Operations assign staff to stores (the store's change form); Sales read the stores.
    grant(apps, OPERATIONS, "stores", {"store": ["view", "add", "change"]})
    grant(apps, SALES, "stores", {"store": ["view"]})


class Migration(migrations.Migration):
    dependencies = [("stores", "0001_initial"), ("jobs", "0002_operations_group")]

    operations = [migrations.RunPython(grant_stores, migrations.RunPython.noop)]
