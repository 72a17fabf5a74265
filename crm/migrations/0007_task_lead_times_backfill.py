from django.db import migrations
from django.db.models import F, OuterRef, Subquery
from django.db.models.functions import Coalesce


def copy_lead_times(apps, schema_editor):
    """Each existing task gets its lead's arrival and recording time, as the processor now writes them."""
    Task = apps.get_model("crm", "Task")
    Lead = apps.get_model("leadgen", "Lead")
    lead = Lead.objects.filter(pk=OuterRef("source_lead_id"))
    Task.objects.filter(source_lead__isnull=False).update(
        arrived_at=Subquery(lead.annotate(arrival=Coalesce("received_at", "created_at")).values("arrival")),
        lead_recorded_at=Subquery(lead.values("created_at")),
    )
    Task.objects.filter(source_lead__isnull=True).update(arrived_at=F("created_at"))


class Migration(migrations.Migration):
    dependencies = [("crm", "0006_task_lead_times")]
    operations = [migrations.RunPython(copy_lead_times, migrations.RunPython.noop)]
