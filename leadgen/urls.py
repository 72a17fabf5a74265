from django.urls import path

from leadgen.api import LeadCreateView, LeadLookupView
from leadgen.views import lead_form

urlpatterns = [
    path("", lead_form, name="lead-form"),
    path("api/leads", LeadCreateView.as_view(), name="leads-create"),
    path("api/leads/lookup", LeadLookupView.as_view(), name="leads-lookup"),
]
