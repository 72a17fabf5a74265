from django.apps import AppConfig


class IntegrationsConfig(AppConfig):
    name = "integrations"
    verbose_name = "Integrations"

    def ready(self):
        from integrations import mail  # noqa: F401  (registers the dead-job alert's handler)
