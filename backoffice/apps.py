from django.apps import AppConfig


class BackofficeConfig(AppConfig):
    """The admin index's dashboard: figures from every app's selectors, on one page."""

    name = "backoffice"
    verbose_name = "Back office"
