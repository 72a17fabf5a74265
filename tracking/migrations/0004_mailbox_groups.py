from django.db import migrations

from foundation.staff_groups import OPERATIONS, SALES, grant


def grant_mailboxes(apps, schema_editor):
    grant(apps, OPERATIONS, "tracking", {"mailbox": ["view", "add", "change", "delete"], "emaillead": ["view"]})
    grant(apps, SALES, "tracking", {"emaillead": ["view"]})


class Migration(migrations.Migration):
    dependencies = [("tracking", "0003_mailbox_emaillead"), ("jobs", "0002_operations_group")]

    operations = [migrations.RunPython(grant_mailboxes, migrations.RunPython.noop)]
