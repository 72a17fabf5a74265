import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("chat", "0001_initial"),
        ("leadgen", "0005_pipedrive_cc_email"),
    ]

    operations = [
        migrations.RenameField(model_name="chatsession", old_name="created_at", new_name="first_seen_at"),
        migrations.RenameField(model_name="chatsession", old_name="updated_at", new_name="last_seen_at"),
        migrations.AlterField(
            model_name="chatsession",
            name="last_seen_at",
            field=models.DateTimeField(auto_now=True, db_index=True),
        ),
        migrations.AddField(
            model_name="chatsession",
            name="lead",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="chat_sessions",
                to="leadgen.lead",
            ),
        ),
        migrations.CreateModel(
            name="ChatMessage",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("role", models.CharField(choices=[("user", "User"), ("assistant", "Assistant")], max_length=16)),
                ("content", models.TextField(blank=True)),
                ("metadata", models.JSONField(blank=True, default=dict)),
                (
                    "state",
                    models.CharField(
                        choices=[("complete", "Complete"), ("partial", "Partial"), ("failed", "Failed")],
                        default="complete",
                        max_length=16,
                    ),
                ),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                (
                    "session",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="messages", to="chat.chatsession"
                    ),
                ),
            ],
            options={
                "ordering": ["created_at", "id"],
                "indexes": [models.Index(fields=["session", "created_at"], name="chat_chatme_session_70d41b_idx")],
            },
        ),
    ]
