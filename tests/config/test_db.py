"""foundation.db: INSERT … ON CONFLICT for one or several instances, and UPDATEs of many rows, on PostgreSQL."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from foundation.db import insert_many_on_conflict, insert_on_conflict, update_many
from jobs.models import Job

pytestmark = pytest.mark.django_db


def job(key, **fields):
    now = timezone.now()
    return Job(kind="tests.record", key=key, payload=fields.pop("payload", {}), run_after=now, created_at=now, **fields)


def test_several_rows_in_one_statement_return_only_the_rows_written():
    Job.objects.create(kind="tests.record", key="taken")
    with CaptureQueriesContext(connection) as queries:
        rows = insert_many_on_conflict(
            [job("a"), job("taken"), job("b")], on_conflict="ON CONFLICT (key) DO NOTHING", returning="id, key"
        )
    assert len(queries.captured_queries) == 1
    assert sorted(key for _pk, key in rows) == ["a", "b"]
    assert {key: pk for pk, key in rows} == dict(Job.objects.filter(key__in=["a", "b"]).values_list("key", "pk"))


def test_defaults_and_auto_now_are_applied_as_save_would():
    insert_many_on_conflict([job("defaults")], on_conflict="ON CONFLICT DO NOTHING")
    stored = Job.objects.get(key="defaults")
    assert stored.status == Job.Status.PENDING and stored.attempts == 0
    assert stored.updated_at is not None


def test_one_instance_returns_its_row_or_none():
    assert insert_on_conflict(job("once"), on_conflict="ON CONFLICT (key) DO NOTHING", returning="key") == ("once",)
    assert insert_on_conflict(job("once"), on_conflict="ON CONFLICT (key) DO NOTHING", returning="key") is None
    assert insert_on_conflict(job("once"), on_conflict="ON CONFLICT (key) DO NOTHING") is None


def test_do_update_is_passed_through():
    insert_on_conflict(job("upsert", payload={"n": 1}), on_conflict="ON CONFLICT DO NOTHING")
    row = insert_on_conflict(
        job("upsert", payload={"n": 2}),
        on_conflict="ON CONFLICT (key) DO UPDATE SET payload = EXCLUDED.payload",
        returning="payload",
    )
    assert row is not None
    assert Job.objects.get(key="upsert").payload == {"n": 2}


def test_nothing_to_insert_runs_no_statement():
    with CaptureQueriesContext(connection) as queries:
        assert insert_many_on_conflict([], on_conflict="ON CONFLICT DO NOTHING", returning="id") == []
    assert queries.captured_queries == []


def test_update_many_writes_each_row_its_own_values_and_only_the_columns_named():
    first, second, other = (Job.objects.create(kind="tests.record", key=key) for key in ("first", "second", "other"))
    first.payload, first.last_error, first.attempts = {"n": 1}, "one", 7  # attempts is not named: not written
    second.payload, second.last_error = {"n": 2}, "two"
    before = first.updated_at

    update_many([first, second], ["payload", "last_error", "updated_at"])

    rows = {job.key: job for job in Job.objects.all()}
    assert (rows["first"].payload, rows["first"].last_error, rows["first"].attempts) == ({"n": 1}, "one", 0)
    assert (rows["second"].payload, rows["second"].last_error) == ({"n": 2}, "two")
    assert rows["first"].updated_at > before  # auto_now applied, as save() applies it
    assert (rows["other"].payload, rows["other"].last_error) == (other.payload, "")


def test_update_many_of_nothing_runs_no_statement():
    with CaptureQueriesContext(connection) as queries:
        update_many([], ["payload"])
    assert queries.captured_queries == []


def test_instances_must_share_one_model_and_pk_handling():
    with pytest.raises(ValueError):
        insert_many_on_conflict([job("x"), Job(pk=5, kind="k", key="y")], on_conflict="ON CONFLICT DO NOTHING")


def test_a_statement_run_again_on_a_connection_is_prepared_once():
    """DATABASE_PREPARED_STATEMENTS (on by default): from its second run on a connection, PostgreSQL
    executes a statement without parsing and planning it again."""
    for n in range(3):
        Job.objects.filter(key=f"prepared-{n}").exists()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s",
            ['%FROM "jobs_job" WHERE "jobs_job"."key" = $%'],
        )
        assert cursor.fetchone()[0] == 1
