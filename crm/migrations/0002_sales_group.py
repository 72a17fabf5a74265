from django.db import migrations

from foundation.staff_groups import SALES, grant


def grant_sales(apps, schema_editor):
    # The timeline is append-only; contacts are never deleted by staff.
    grant(
        apps,
        SALES,
        "crm",
        {"contact": ["view", "change"], "task": ["view", "add", "change"], "timelineevent": ["view"]},
    )


class Migration(migrations.Migration):
    dependencies = [("crm", "0001_initial"), ("jobs", "0002_operations_group")]

    operations = [migrations.RunPython(grant_sales, migrations.RunPython.noop)]
