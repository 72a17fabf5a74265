"""The staff groups, defined here once: Sales (leads, contacts, tasks), Operations (jobs,
schedules, mailboxes, stores) and Managers (every store's rows, and the data that belongs to no
store). Each app's data migration grants its own models.

Permissions are normally created after `migrate` finishes; `grant` creates
them first so a group can receive them in the same run.
"""

from django.contrib.auth.management import create_permissions

SALES = "Sales"
OPERATIONS = "Operations"
MANAGERS = "Managers"


def grant(apps, group_name: str, app_label: str, models: dict[str, list[str]]):
    """Give `group_name` the listed actions (view, add, change, delete) on each model."""
    app_config = apps.get_app_config(app_label)
    app_config.models_module = True
    create_permissions(app_config, apps=apps, verbosity=0)
    app_config.models_module = None

    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    group, _ = Group.objects.get_or_create(name=group_name)
    codenames = [f"{action}_{model}" for model, actions in models.items() for action in actions]
    group.permissions.add(
        *Permission.objects.filter(content_type__app_label=app_label, codename__in=codenames)
    )


def revoke_group(apps, group_name: str):
    apps.get_model("auth", "Group").objects.filter(name=group_name).delete()
