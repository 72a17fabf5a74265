# Store moved to the stores app with its table: the foreign key changes in the state only.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("leadgen", "0005_pipedrive_cc_email"), ("stores", "0001_initial")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="lead",
                    name="store",
                    field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, to="stores.store"),
                ),
            ],
            database_operations=[],
        ),
    ]
