from django.apps import AppConfig


class LeadgenConfig(AppConfig):
    name = "leadgen"
    verbose_name = "Leads"
