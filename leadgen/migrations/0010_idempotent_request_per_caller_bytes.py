import json

from django.db import migrations, models
from django.db.models import Min

# Rows written before keys were per caller name no caller (""): no request matches them, so they are never
# replayed to anyone, and the hourly purge drops them within the TTL. Their bodies are kept as bytes so
# that going back loses nothing.


def bodies_to_bytes(apps, schema_editor):
    IdempotentRequest = apps.get_model("leadgen", "IdempotentRequest")
    for row in IdempotentRequest.objects.filter(response_status__gt=0).iterator():
        # As the API's JSON renderer writes it: compact, UTF-8.
        row.response_content = json.dumps(row.response_body, ensure_ascii=False, separators=(",", ":")).encode()
        row.response_content_type = "application/json"
        row.save(update_fields=["response_content", "response_content_type"])


def bytes_to_bodies(apps, schema_editor):
    IdempotentRequest = apps.get_model("leadgen", "IdempotentRequest")
    for row in IdempotentRequest.objects.iterator():
        content = bytes(row.response_content)
        try:
            row.response_body = json.loads(content) if content else {}
        except ValueError:
            row.response_body = {}
        row.save(update_fields=["response_body"])


def keep_one_row_per_key(apps, schema_editor):
    """Going back to one key per endpoint: of the callers' rows for a key, the first one stays."""
    IdempotentRequest = apps.get_model("leadgen", "IdempotentRequest")
    first_ids = IdempotentRequest.objects.values("scope", "key").annotate(first=Min("id")).values("first")
    IdempotentRequest.objects.exclude(id__in=first_ids).delete()


class Migration(migrations.Migration):
    dependencies = [("leadgen", "0009_lead_public_id")]

    operations = [
        migrations.AddField(
            model_name="idempotentrequest",
            name="caller",
            field=models.CharField(
                default="", help_text="Keyed hash of who sent the key: keys are per caller.", max_length=64
            ),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="idempotentrequest",
            name="response_content",
            field=models.BinaryField(default=b"", help_text="The response body as sent."),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="idempotentrequest",
            name="response_content_type",
            field=models.CharField(default="", max_length=255),
            preserve_default=False,
        ),
        # Nullable before the copy, so that going back can re-add the column to existing rows and fill it.
        migrations.AlterField(model_name="idempotentrequest", name="response_body", field=models.JSONField(null=True)),
        migrations.RunPython(bodies_to_bytes, bytes_to_bodies),
        migrations.RemoveField(model_name="idempotentrequest", name="response_body"),
        migrations.RemoveConstraint(model_name="idempotentrequest", name="idempotent_request_unique_key"),
        migrations.AddConstraint(
            model_name="idempotentrequest",
            constraint=models.UniqueConstraint(
                fields=("scope", "caller", "key"), name="idempotent_request_unique_caller_key"
            ),
        ),
        migrations.RunPython(migrations.RunPython.noop, keep_one_row_per_key),
    ]
