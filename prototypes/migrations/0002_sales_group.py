from django.db import migrations

from foundation.staff_groups import OPERATIONS, SALES, grant


def grant_groups(apps, schema_editor):
    # Staff retry and cancel prototypes (change); nobody adds or deletes them by hand.
    for group in (SALES, OPERATIONS):
        grant(apps, group, "prototypes", {"prototype": ["view", "change"], "prototypeevent": ["view"]})


class Migration(migrations.Migration):
    dependencies = [("prototypes", "0001_initial"), ("jobs", "0002_operations_group")]

    operations = [migrations.RunPython(grant_groups, migrations.RunPython.noop)]
