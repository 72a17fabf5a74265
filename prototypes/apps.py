from django.apps import AppConfig


class PrototypesConfig(AppConfig):
    name = "prototypes"
    verbose_name = "Prototypes"

    def ready(self):
        from prototypes import handlers  # noqa: F401  (registers the job kinds)
