import datetime
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('crm', '0007_task_lead_times_backfill'),
        ('stores', '0004_store_reassign_overdue'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='AssignmentRule',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('service_type', models.CharField(blank=True, help_text='Empty: any.', max_length=32)),
                ('channel', models.CharField(blank=True, help_text='Empty: any.', max_length=16)),
                ('priority', models.PositiveIntegerField(default=100, help_text='Lower first.')),
                ('is_active', models.BooleanField(default=True)),
            ],
            options={
                'ordering': ['priority', 'pk'],
            },
        ),
        migrations.CreateModel(
            name='RepProfile',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('timezone', models.CharField(default='America/New_York', max_length=64)),
                ('work_days', models.JSONField(blank=True, default=list, help_text='ISO weekdays worked, 1 = Monday … 7 = Sunday.')),
                ('work_start', models.TimeField(default=datetime.time(9, 0))),
                ('work_end', models.TimeField(default=datetime.time(17, 0))),
                ('is_away', models.BooleanField(default=False, help_text='Away: takes no new leads whatever the hours.')),
                ('max_open_tasks', models.PositiveIntegerField(default=25, help_text='Takes no new lead while this many are open.')),
                ('last_assigned_at', models.DateTimeField(blank=True, help_text='When round-robin last chose this rep.', null=True)),
            ],
        ),
        migrations.RemoveConstraint(
            model_name='contact',
            name='uq_contacts_phone_store',
        ),
        migrations.AddField(
            model_name='contact',
            name='company',
            field=models.CharField(blank=True, max_length=200),
        ),
        migrations.AddField(
            model_name='contact',
            name='email',
            field=models.CharField(blank=True, help_text='Normalized (lower case); empty when only the phone is known.', max_length=254),
        ),
        migrations.AddField(
            model_name='task',
            name='escalated_at',
            field=models.DateTimeField(blank=True, help_text="When the owner's manager was alerted that it passed its due time.", null=True),
        ),
        migrations.AlterField(
            model_name='contact',
            name='phone',
            field=models.CharField(blank=True, help_text='E.164; empty when only the email is known.', max_length=32),
        ),
        migrations.AlterField(
            model_name='contact',
            name='store',
            field=models.ForeignKey(blank=True, help_text='Empty: the shared pool of leads of no store.', null=True, on_delete=django.db.models.deletion.PROTECT, related_name='contacts', to='stores.store'),
        ),
        migrations.AlterField(
            model_name='task',
            name='store',
            field=models.ForeignKey(blank=True, help_text="The contact's store; empty for the shared pool.", null=True, on_delete=django.db.models.deletion.PROTECT, related_name='tasks', to='stores.store'),
        ),
        migrations.AlterField(
            model_name='timelineevent',
            name='store',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='timeline_events', to='stores.store'),
        ),
        migrations.AddConstraint(
            model_name='contact',
            constraint=models.UniqueConstraint(condition=models.Q(('phone', ''), _negated=True), fields=('store', 'phone'), name='uq_contacts_store_phone', nulls_distinct=False),
        ),
        migrations.AddConstraint(
            model_name='contact',
            constraint=models.UniqueConstraint(condition=models.Q(('email', ''), _negated=True), fields=('store', 'email'), name='uq_contacts_store_email', nulls_distinct=False),
        ),
        migrations.AddConstraint(
            model_name='contact',
            constraint=models.CheckConstraint(condition=models.Q(('email', ''), ('phone', ''), _negated=True), name='ck_contacts_known_by_something'),
        ),
        migrations.AddField(
            model_name='assignmentrule',
            name='owner',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='assignment_rules', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddField(
            model_name='assignmentrule',
            name='store',
            field=models.ForeignKey(blank=True, help_text='Empty: leads of no store.', null=True, on_delete=django.db.models.deletion.CASCADE, related_name='assignment_rules', to='stores.store'),
        ),
        migrations.AddField(
            model_name='repprofile',
            name='manager',
            field=models.ForeignKey(blank=True, help_text='Alerted when a task of this rep passes its due time without a response.', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='reports', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddField(
            model_name='repprofile',
            name='user',
            field=models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='rep_profile', to=settings.AUTH_USER_MODEL),
        ),
    ]
