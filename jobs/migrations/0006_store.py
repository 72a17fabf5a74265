import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('jobs', '0005_jobstep'),
        ('stores', '0003_view_all_stores'),
    ]

    operations = [
        migrations.AddField(
            model_name='job',
            name='store',
            field=models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='stores.store'),
        ),
        migrations.AddIndex(
            model_name='job',
            index=models.Index(condition=models.Q(('store__isnull', False)), fields=['store', '-created_at'], name='job_store_idx'),
        ),
    ]
