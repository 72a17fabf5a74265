from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('stores', '0003_view_all_stores'),
    ]

    operations = [
        migrations.AddField(
            model_name='store',
            name='reassign_overdue',
            field=models.BooleanField(default=False, help_text='A task past its due time without a response goes to the next rep on shift.'),
        ),
    ]
