"""The project's URLs plus `POST /bench/bare-leads`, the baseline of the intake benchmark."""

from django.urls import path

from bench.intake.bare import BareLeadCreateView, PoolStatsView
from config.urls import urlpatterns as project_urlpatterns

urlpatterns = [
    path("bench/bare-leads", BareLeadCreateView.as_view(), name="bench-bare-leads"),
    path("bench/pool-stats", PoolStatsView.as_view(), name="bench-pool-stats"),
    *project_urlpatterns,
]
