"""The database settings built from the environment, read as a fresh process would (settings load once), and
the servers every run needs: PostgreSQL and Redis."""

import json
import os
import subprocess
import sys

import pytest

READ_DATABASE = (
    "import django, json; django.setup(); from django.conf import settings; "
    "d = settings.DATABASES['default']; print(json.dumps({'options': d['OPTIONS'], 'max_age': d['CONN_MAX_AGE']}))"
)


def database_settings(**env):
    environment = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", **env}
    out = subprocess.run([sys.executable, "-c", READ_DATABASE], env=environment, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("pool", ["true", "false"])
def test_options_from_the_database_url_are_kept(pool):
    url = "postgres://leads:secret@db.example:5432/leads?sslmode=require"
    got = database_settings(DATABASE_URL=url, DATABASE_POOL=pool)
    assert got["options"]["sslmode"] == "require"
    assert got["options"]["server_side_binding"] is True


def test_web_processes_use_a_pool_and_workers_keep_one_connection():
    url = "postgres://leads:secret@db.example:5432/leads"
    web = database_settings(DATABASE_URL=url)
    worker = database_settings(DATABASE_URL=url, DATABASE_POOL="false", DATABASE_CONN_MAX_AGE="120")
    assert web["options"]["pool"]["max_size"] == 20 and web["max_age"] == 0
    assert "pool" not in worker["options"] and worker["max_age"] == 120


def test_prepared_statements_can_be_switched_off_for_a_transaction_pooler():
    got = database_settings(DATABASE_URL="postgres://leads@db.example/leads", DATABASE_PREPARED_STATEMENTS="false")
    assert "server_side_binding" not in got["options"] and "prepare_threshold" not in got["options"]


@pytest.mark.parametrize(
    ("env", "message"),
    [
        # Empty rather than absent: a developer's .env cannot fill it in (it never overrides the environment).
        ({"DATABASE_URL": ""}, "DATABASE_URL is required: a PostgreSQL URL"),
        ({"DATABASE_URL": "sqlite:////tmp/leads.sqlite3"}, "DATABASE_URL must be a PostgreSQL URL (postgres://…)"),
        ({"REDIS_URL": ""}, "REDIS_URL is required: a Redis URL"),
    ],
)
def test_settings_refuse_to_load_without_postgresql_or_redis(env, message):
    environment = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", **env}
    out = subprocess.run([sys.executable, "-c", "import django; django.setup()"], env=environment, capture_output=True,
                         text=True)  # fmt: skip
    assert out.returncode != 0
    assert "ImproperlyConfigured" in out.stderr and message in out.stderr
    assert "sqlite:///tmp" not in out.stderr, "the URL itself is not repeated: it may hold a password"
    assert "`make run` and scripts/with-services start local PostgreSQL and Redis servers" in out.stderr
