from django.apps import AppConfig


class LeadgenConfig(AppConfig):
    name = "leadgen"
    verbose_name = "Leads"

    def ready(self):
        from leadgen import handlers, receivers  # noqa: F401  (registers the job kinds and signal receivers)
