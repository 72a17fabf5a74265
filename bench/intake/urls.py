"""The project's URLs plus `POST /bench/bare-leads`, the baseline of the intake benchmark."""

from django.urls import path

from bench.intake import experiments
from bench.intake.bare import BareLeadCreateView
from config.urls import urlpatterns as project_urlpatterns

experiments.apply()  # no-op unless BENCH_EXPERIMENTS is set

urlpatterns = [
    path("bench/bare-leads", BareLeadCreateView.as_view(), name="bench-bare-leads"),
    *project_urlpatterns,
]
