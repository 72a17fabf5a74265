# TrackedUser moves here from tracking. Its table keeps its name (tracking_trackeduser), so the move is
# state only: no data is copied. The content type moves to this app, and with it the permissions (view,
# deliver) the staff groups hold and the admin log entries.

from django.conf import settings
from django.db import migrations, models


def content_type_move(apps, schema_editor, *, source, target):
    ContentType = apps.get_model("contenttypes", "ContentType")
    Permission = apps.get_model("auth", "Permission")
    moving = ContentType.objects.filter(app_label=source, model="trackeduser").first()
    existing = ContentType.objects.filter(app_label=target, model="trackeduser").first()
    if moving is not None and existing is None:
        moving.app_label = target
        moving.save(update_fields=["app_label"])
    elif moving is not None:
        # Both exist (the target's permissions were created first): groups and users keep what they held.
        for old in Permission.objects.filter(content_type=moving):
            new, _ = Permission.objects.get_or_create(
                content_type=existing, codename=old.codename, defaults={"name": old.name}
            )
            for group in old.group_set.all():
                group.permissions.add(new)
            for user in old.user_set.all():
                user.user_permissions.add(new)
    ContentType.objects.clear_cache()


def forwards(apps, schema_editor):
    content_type_move(apps, schema_editor, source="tracking", target="docs_users")


def backwards(apps, schema_editor):
    content_type_move(apps, schema_editor, source="docs_users", target="tracking")


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("tracking", "0011_trackeduser_managers_only"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="TrackedUser",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("sub", models.CharField(help_text="The identity provider's user id.", max_length=255, unique=True, verbose_name="subject")),
                        ("email", models.EmailField(blank=True, max_length=254)),
                        ("given_name", models.CharField(blank=True, max_length=150)),
                        ("family_name", models.CharField(blank=True, max_length=150)),
                        ("company", models.CharField(blank=True, help_text="Organization name, else from the email domain.", max_length=200)),
                        ("signed_up_at", models.DateTimeField(blank=True, null=True)),
                        ("last_sign_in_at", models.DateTimeField(blank=True, null=True)),
                        ("last_channel", models.CharField(blank=True, choices=[("mcp", "MCP server"), ("docs-login", "Docs login")], max_length=16)),
                        ("mcp_client", models.CharField(blank=True, max_length=100, verbose_name="MCP client")),
                        ("last_activity_at", models.DateTimeField(db_index=True)),
                        ("pending_since", models.DateTimeField(blank=True, null=True)),
                        ("mcp_tool_counts", models.JSONField(blank=True, default=dict)),
                        ("mcp_last_tool_at", models.DateTimeField(blank=True, null=True)),
                        ("mcp_agent_intents", models.JSONField(blank=True, default=list)),
                        ("docs_recent_pages", models.JSONField(blank=True, default=list)),
                        ("docs_page_counts", models.JSONField(blank=True, default=dict)),
                        ("docs_product_areas", models.JSONField(blank=True, default=dict)),
                        ("docs_getting_started_visits", models.PositiveIntegerField(default=0)),
                        ("docs_search_terms", models.JSONField(blank=True, default=list)),
                        ("docs_last_active_at", models.DateTimeField(blank=True, null=True)),
                        ("kapa_thread_count", models.PositiveIntegerField(blank=True, null=True)),
                        ("kapa_last_interaction_at", models.DateTimeField(blank=True, null=True)),
                        ("kapa_questions", models.JSONField(blank=True, default=list)),
                        ("kapa_competitor_mentions", models.JSONField(blank=True, default=dict)),
                        ("kapa_refreshed_at", models.DateTimeField(blank=True, null=True)),
                        ("kapa_asked_thread_count", models.PositiveIntegerField(default=0, verbose_name="threads asked through MCP")),
                        ("kapa_asked_questions", models.JSONField(blank=True, default=list)),
                        ("last_delivered_at", models.DateTimeField(blank=True, null=True)),
                        ("last_delivered_payload", models.JSONField(blank=True, help_text="As sent, redacted.", null=True)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("updated_at", models.DateTimeField(auto_now=True)),
                    ],
                    options={
                        "db_table": "tracking_trackeduser",
                        "ordering": ["-last_activity_at"],
                        "permissions": [("deliver_trackeduser", "Can deliver tracked users to the CRM now")],
                        "indexes": [
                            models.Index(
                                condition=models.Q(("pending_since__isnull", False)),
                                fields=["pending_since", "id"],
                                name="tracking_user_pending_idx",
                            )
                        ],
                    },
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(forwards, backwards),
    ]
