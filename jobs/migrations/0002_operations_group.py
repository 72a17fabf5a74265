from django.db import migrations

from foundation.staff_groups import OPERATIONS, SALES, grant, revoke_group

ALL = ["view", "add", "change", "delete"]


def create_groups(apps, schema_editor):
    grant(apps, OPERATIONS, "jobs", {"job": ["view", "change"], "jobattempt": ["view"]})
    grant(
        apps,
        OPERATIONS,
        "django_celery_beat",
        {
            "periodictask": ALL,
            "intervalschedule": ALL,
            "crontabschedule": ALL,
            "solarschedule": ALL,
            "clockedschedule": ALL,
        },
    )
    apps.get_model("auth", "Group").objects.get_or_create(name=SALES)


def remove_groups(apps, schema_editor):
    revoke_group(apps, OPERATIONS)
    revoke_group(apps, SALES)


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0001_initial"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [migrations.RunPython(create_groups, remove_groups)]
