"""The project's URLs plus the intake benchmark's baselines, `POST /bench/bare-leads` and `/bench/durable-leads`."""

from django.urls import path

from bench.intake.bare import BareDurableLeadCreateView, BareLeadCreateView, PoolStatsView
from config.urls import urlpatterns as project_urlpatterns

urlpatterns = [
    path("bench/bare-leads", BareLeadCreateView.as_view(), name="bench-bare-leads"),
    path("bench/durable-leads", BareDurableLeadCreateView.as_view(), name="bench-durable-leads"),
    path("bench/pool-stats", PoolStatsView.as_view(), name="bench-pool-stats"),
    *project_urlpatterns,
]
