import os

from django.core.wsgi import get_wsgi_application

from config.sentry import sentry_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_wsgi_application()
sentry_init()  # sentry-sdk wraps Django's WSGI handler itself
