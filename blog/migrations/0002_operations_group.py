from django.db import migrations

from foundation.staff_groups import OPERATIONS, grant


def grant_operations(apps, schema_editor):
    grant(apps, OPERATIONS, "blog", {"blogcache": ["view", "purge"]})


class Migration(migrations.Migration):
    dependencies = [("blog", "0001_blog_cache"), ("jobs", "0002_operations_group")]

    operations = [migrations.RunPython(grant_operations, migrations.RunPython.noop)]
