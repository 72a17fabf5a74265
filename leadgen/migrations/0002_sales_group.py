from django.db import migrations

from foundation.staff_groups import SALES, grant


def grant_sales(apps, schema_editor):
    # Leads are never deleted by staff: a dropped lead is lost money.
    grant(apps, SALES, "leadgen", {"lead": ["view", "add", "change"]})


class Migration(migrations.Migration):
    dependencies = [("leadgen", "0001_initial"), ("jobs", "0002_operations_group")]

    operations = [migrations.RunPython(grant_sales, migrations.RunPython.noop)]
