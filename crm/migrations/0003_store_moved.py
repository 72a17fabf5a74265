# Store moved to the stores app with its table: the foreign keys change in the state only.

import django.db.models.deletion
from django.db import migrations, models


def _store_fk(related_name):
    return models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name=related_name, to="stores.store")


class Migration(migrations.Migration):
    dependencies = [("crm", "0002_sales_group"), ("stores", "0001_initial")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(model_name="contact", name="store", field=_store_fk("contacts")),
                migrations.AlterField(model_name="task", name="store", field=_store_fk("tasks")),
                migrations.AlterField(model_name="timelineevent", name="store", field=_store_fk("timeline_events")),
            ],
            database_operations=[],
        ),
    ]
