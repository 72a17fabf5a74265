"""Settings of the IMAP benchmark process: the project's, plus django-mailbox for the baseline importer."""

from config.settings import *  # noqa: F403

INSTALLED_APPS = [*INSTALLED_APPS, "django_mailbox"]  # noqa: F405
