from django.apps import AppConfig


class CrmConfig(AppConfig):
    name = "crm"
    verbose_name = "CRM"

    def ready(self):
        # Handler modules register their job kinds on import.
        from crm import handlers  # noqa: F401
