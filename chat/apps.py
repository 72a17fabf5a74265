from django.apps import AppConfig


class ChatConfig(AppConfig):
    name = "chat"
    verbose_name = "Sales chat"

    def ready(self):
        from chat import handlers  # noqa: F401  (registers the job kinds)
