from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
    ]

    operations = [
        migrations.CreateModel(
            name='SubjectRequest',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('kind', models.CharField(choices=[('export', 'Export'), ('erase', 'Erase')], max_length=8)),
                ('actor', models.CharField(help_text="The staff user or the command's operator.", max_length=150)),
                ('requested_at', models.DateTimeField(auto_now_add=True)),
                ('finished_at', models.DateTimeField(blank=True, null=True)),
                ('rows', models.JSONField(blank=True, default=dict, help_text='Rows found (export) or erased (erase), per table.')),
            ],
            options={
                'ordering': ['-requested_at'],
            },
        ),
    ]
