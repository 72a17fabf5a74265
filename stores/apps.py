from django.apps import AppConfig


class StoresConfig(AppConfig):
    name = "stores"
    verbose_name = "Stores"
