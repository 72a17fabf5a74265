"""Bench-only settings: the project's settings plus the minimal relay (bench/chat/urls.py)."""

from config.settings import *  # noqa: F403

ROOT_URLCONF = "bench.chat.urls"
