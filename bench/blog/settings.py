"""Bench-only settings: the project's settings plus the bare baseline view (bench/blog/urls.py)."""

from config.settings import *  # noqa: F403

ROOT_URLCONF = "bench.blog.urls"
