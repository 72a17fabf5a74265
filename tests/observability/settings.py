"""Settings of the web process the Sentry test starts: the production settings, with a view that fails."""

from config.settings import *  # noqa: F403

ROOT_URLCONF = "tests.observability.urls"
