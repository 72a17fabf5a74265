from django.db import migrations

from foundation.staff_groups import SALES, grant


def grant_sales(apps, schema_editor):
    # Sales staff read conversations; transcripts are deleted by retention only.
    grant(apps, SALES, "chat", {"chatsession": ["view"], "chatmessage": ["view"]})


class Migration(migrations.Migration):
    dependencies = [("chat", "0002_chat_messages"), ("jobs", "0002_operations_group")]

    operations = [migrations.RunPython(grant_sales, migrations.RunPython.noop)]
