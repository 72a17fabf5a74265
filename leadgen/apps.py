from django.apps import AppConfig


class LeadgenConfig(AppConfig):
    name = "leadgen"
    verbose_name = "Leads"

    def ready(self):
        from leadgen import handlers  # noqa: F401  (registers the job kinds)
