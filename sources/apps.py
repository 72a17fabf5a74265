from django.apps import AppConfig


class SourcesConfig(AppConfig):
    name = "sources"
    verbose_name = "Inbound lead sources"

    def ready(self):
        from sources import handlers  # noqa: F401  (registers the job kinds)
