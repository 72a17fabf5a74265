import uuid

from django.db import migrations, models


def fill_public_ids(apps, schema_editor):
    Lead = apps.get_model("leadgen", "Lead")
    for pk in Lead.objects.filter(public_id__isnull=True).values_list("pk", flat=True).iterator():
        Lead.objects.filter(pk=pk).update(public_id=uuid.uuid4())


class Migration(migrations.Migration):
    # Three steps: a unique column with a callable default would give every existing row the same value.
    dependencies = [("leadgen", "0008_lead_clickup_task")]

    operations = [
        migrations.AddField(model_name="lead", name="public_id", field=models.UUIDField(null=True, editable=False)),
        migrations.RunPython(fill_public_ids, migrations.RunPython.noop, elidable=True),
        migrations.AlterField(
            model_name="lead",
            name="public_id",
            field=models.UUIDField(
                default=uuid.uuid4, editable=False, unique=True, help_text="The lead's id in public URLs and API answers."
            ),
        ),
    ]
