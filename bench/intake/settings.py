"""Bench-only settings: the project's settings plus the bare baseline endpoint (bench/intake/urls.py).

daphne runs with DJANGO_SETTINGS_MODULE=bench.intake.settings during the intake benchmark only.
BENCH_EXPERIMENTS (see bench/intake/experiments.py) may swap a middleware for a candidate change.
"""

from bench.intake import experiments
from config.settings import *  # noqa: F403
from config.settings import CACHES, MIDDLEWARE

ROOT_URLCONF = "bench.intake.urls"
MIDDLEWARE = experiments.middleware(MIDDLEWARE)
CACHES = experiments.caches(CACHES)
