from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = "Operations: jobs"

    def ready(self):
        # Handler modules register their kinds on import.
        from jobs import handlers  # noqa: F401
