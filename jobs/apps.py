from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = "Operations: jobs"

    def ready(self):
        from jobs import handlers  # noqa: F401  (handler modules register their kinds on import)
