"""Sessions and public limits: admin login lockout, expired sessions deleted, /readyz cheap and quiet.
(The docs session's separation, its login throttle and email_verified: tests/docs_users/test_docs_login.py.)"""

import pytest
from django.contrib.sessions.models import Session
from django.core.cache import cache
from django.urls import reverse
from django.utils import timezone

from docs_users import tasks
from foundation.schedules import PERIODIC_TASKS
from jobs import runtime as job_runtime

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_counters():
    cache.clear()


def test_admin_login_locks_out_after_repeated_failures(client, django_user_model, settings):
    django_user_model.objects.create_superuser("root", "root@example.com", "right-password")
    login = reverse("admin:login")
    wrong = {"username": "root", "password": "wrong"}
    failures = [client.post(login, wrong) for _ in range(settings.AXES_FAILURE_LIMIT)]
    assert [response.status_code for response in failures] == [200] * (settings.AXES_FAILURE_LIMIT - 1) + [429]
    locked = client.post(login, {"username": "root", "password": "right-password"})
    assert locked.status_code == 429, "even the right password is refused while locked out"
    assert "_auth_user_id" not in client.session


def test_expired_sessions_are_deleted_on_a_schedule():
    assert any(task["task"] == "tracking.clear_expired_sessions" for task in PERIODIC_TASKS.values())
    Session.objects.create(session_key="old", session_data="", expire_date=timezone.now() - timezone.timedelta(1))
    Session.objects.create(session_key="new", session_data="", expire_date=timezone.now() + timezone.timedelta(1))
    tasks.clear_expired_sessions()
    assert list(Session.objects.values_list("session_key", flat=True)) == ["new"]


@pytest.fixture
def readyz(settings):
    settings.HEALTH_CHECK_TOKEN = "health-token"
    settings.READYZ_CACHE_SECONDS = 0
    job_runtime.jobs_sweep()
    return settings


def test_readyz_shows_details_only_to_staff_and_the_token(client, readyz, django_user_model):
    anonymous = client.get("/readyz", REMOTE_ADDR="127.0.0.1")
    assert anonymous.status_code == 200 and anonymous.json() == {"status": "ok"}
    assert client.get("/readyz", HTTP_AUTHORIZATION="Bearer wrong").json() == {"status": "ok"}
    with_token = client.get("/readyz", HTTP_AUTHORIZATION="Bearer health-token").json()
    assert with_token["checks"] == {"Database": "OK", "Cache": "OK", "Broker": "OK", "Sweep": "OK", "McpServer": "OK"}
    client.force_login(django_user_model.objects.create_user("ops", is_staff=True))
    assert "details" in client.get("/readyz").json()


def test_readyz_is_cached_for_a_few_seconds(client, readyz):
    from config.celery import app as celery_app

    readyz.READYZ_CACHE_SECONDS = 60
    client.get("/readyz")
    opened = []
    original = celery_app.connection_for_write
    celery_app.connection_for_write = lambda *a, **k: opened.append(1) or original(*a, **k)
    try:
        for _ in range(5):
            assert client.get("/readyz").status_code == 200
    finally:
        celery_app.connection_for_write = original
    assert opened == [], "no broker connection while the result is fresh"


def test_readyz_is_unhealthy_when_the_sweep_stops(client, readyz):
    readyz.JOBS_SWEEP_LATE_SECONDS = 0
    late = client.get("/readyz", HTTP_AUTHORIZATION="Bearer health-token")
    assert late.status_code == 500 and "late: last ran " in late.json()["checks"]["Sweep"]
    assert client.get("/readyz").json() == {"status": "unavailable"}
