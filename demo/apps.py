from django.apps import AppConfig


class DemoConfig(AppConfig):
    """`manage.py load_demo`: the demo data of `make run`, which spans every app."""

    name = "demo"
    verbose_name = "Demo data"
