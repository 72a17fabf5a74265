"""Bench-only settings: the project's settings plus the bare relay baseline (bench/sse/urls.py).

Everything else is as in production under scripts/with-services: PostgreSQL
with its connection pool, Redis for the cache and the channel layer.
"""

from config.settings import *  # noqa: F403

ROOT_URLCONF = "bench.sse.urls"
