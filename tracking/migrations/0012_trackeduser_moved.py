# TrackedUser now belongs to the docs_users app, which kept its table: tracking forgets it in the state only.

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("tracking", "0011_trackeduser_managers_only"),
        ("docs_users", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="TrackedUser")], database_operations=[]
        ),
    ]
