# Store now belongs to the stores app, which kept its table: tracking forgets it in the state only.

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("tracking", "0006_trackeduser_groups"),
        ("stores", "0001_initial"),
        ("leadgen", "0006_store_moved"),
        ("crm", "0003_store_moved"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[migrations.DeleteModel(name="Store")], database_operations=[]),
    ]
