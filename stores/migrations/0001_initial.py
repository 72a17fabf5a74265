# The Store model moves here from tracking. Its table keeps its name (tracking_store), so the
# move is state only: no data is copied. The content type (and with it the permissions and
# admin log entries) moves to this app.

import datetime
import uuid

from django.conf import settings
from django.db import migrations, models

import stores.models


def content_type_move(apps, schema_editor, *, source, target):
    ContentType = apps.get_model("contenttypes", "ContentType")
    if not ContentType.objects.filter(app_label=target, model="store").exists():
        ContentType.objects.filter(app_label=source, model="store").update(app_label=target)
    ContentType.objects.clear_cache()


def forwards(apps, schema_editor):
    content_type_move(apps, schema_editor, source="tracking", target="stores")


def backwards(apps, schema_editor):
    content_type_move(apps, schema_editor, source="stores", target="tracking")


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("tracking", "0006_trackeduser_groups"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="Store",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("franchise", models.CharField(help_text="Franchise or brand.", max_length=120)),
                        ("name", models.CharField(max_length=200)),
                        ("account_id", models.CharField(db_index=True, max_length=64)),
                        ("store_uuid", models.UUIDField(default=uuid.uuid4, unique=True)),
                        ("lead_email", models.EmailField(blank=True, help_text="Address lead notifications are sent to.", max_length=254, null=True, unique=True)),
                        ("tracking_id", models.CharField(blank=True, help_text="The ID in lead-tracking+{ID}@…", max_length=64, null=True, unique=True)),
                        ("timezone", models.CharField(default="America/New_York", max_length=64, validators=[stores.models.validate_timezone])),
                        ("quiet_hours_start", models.TimeField(default=datetime.time(21, 0))),
                        ("quiet_hours_end", models.TimeField(default=datetime.time(8, 0))),
                        ("is_active", models.BooleanField(default=True)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("updated_at", models.DateTimeField(auto_now=True)),
                    ],
                    options={"db_table": "tracking_store", "ordering": ["franchise", "name"]},
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(forwards, backwards),
        migrations.AddField(
            model_name="store",
            name="staff",
            field=models.ManyToManyField(
                blank=True,
                db_table="stores_store_staff",
                help_text="Staff who work this store. Staff with no store see every store.",
                related_name="stores",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
    ]
