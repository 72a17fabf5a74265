from django.db import migrations

from foundation.staff_groups import OPERATIONS, grant


def grant_operations(apps, schema_editor):
    grant(
        apps,
        OPERATIONS,
        "sources",
        {"inboundsource": ["view", "add", "change"], "inboundrequest": ["view", "replay"]},
    )


class Migration(migrations.Migration):
    dependencies = [("sources", "0001_initial"), ("jobs", "0002_operations_group")]

    operations = [migrations.RunPython(grant_operations, migrations.RunPython.noop)]
