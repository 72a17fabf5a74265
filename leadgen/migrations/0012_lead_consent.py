from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('leadgen', '0011_lead_is_test_received_channels'),
    ]

    operations = [
        migrations.AddField(
            model_name='lead',
            name='consent_text',
            field=models.TextField(blank=True, help_text='The consent the person agreed to, as shown to them.'),
        ),
        migrations.AddField(
            model_name='lead',
            name='consent_version',
            field=models.CharField(blank=True, max_length=32),
        ),
        migrations.AddField(
            model_name='lead',
            name='consented_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
