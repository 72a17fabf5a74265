from django.db import migrations
from django.db.models import F
from django.utils import timezone

from foundation.staff_groups import MANAGERS, grant


def grant_managers(apps, schema_editor):
    # Managers set reps' hours, caps and managers, and the rules naming an owner. Sales reps hold no
    # permission on profiles: they flip only their own away switch, from the work queue.
    grant(
        apps,
        MANAGERS,
        "crm",
        {"repprofile": ["view", "add", "change", "delete"], "assignmentrule": ["view", "add", "change", "delete"]},
    )


def overdue_before_escalation(apps, schema_editor):
    # Tasks already overdue when escalation starts are not escalated: a burst of alerts about old tasks
    # would bury the first real ones. The dashboard's "overdue now" still shows them.
    Task = apps.get_model("crm", "Task")
    Task.objects.filter(status="pending", due_at__lte=timezone.now(), escalated_at__isnull=True).update(
        escalated_at=F("due_at")
    )


class Migration(migrations.Migration):
    dependencies = [("crm", "0008_contacts_by_email_or_phone_owners"), ("stores", "0003_view_all_stores")]

    operations = [
        migrations.RunPython(grant_managers, migrations.RunPython.noop),
        migrations.RunPython(overdue_before_escalation, migrations.RunPython.noop),
    ]
