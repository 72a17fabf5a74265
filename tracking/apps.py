from django.apps import AppConfig


class TrackingConfig(AppConfig):
    name = "tracking"
    verbose_name = "Tracking"

    def ready(self):
        # Handler modules register their job kinds on import; signals keep the store mapping fresh.
        from tracking import handlers, signals  # noqa: F401
