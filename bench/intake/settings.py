"""Bench-only settings: the project's settings plus the bare baseline endpoint (bench/intake/urls.py).

daphne runs with DJANGO_SETTINGS_MODULE=bench.intake.settings during the intake benchmark only.
"""

from config.settings import *  # noqa: F403

ROOT_URLCONF = "bench.intake.urls"
