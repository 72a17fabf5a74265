import os

from celery import Celery
from celery.signals import task_postrun, task_prerun
from django.db import close_old_connections

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("leadgen")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@task_prerun.connect
@task_postrun.connect
def release_db_connections(**kwargs):
    """Around each task what Django does around each request: the connection goes back to the
    pool, or is dropped if it broke (see CELERY_DB_REUSE_MAX in settings)."""
    close_old_connections()
