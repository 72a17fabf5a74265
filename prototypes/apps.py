from django.apps import AppConfig


class PrototypesConfig(AppConfig):
    name = "prototypes"
    verbose_name = "Prototypes"
