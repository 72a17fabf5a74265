"""Database helpers shared by email lead tracking and the CRM lead processor.

- `insert_on_conflict`: one-statement upserts. The lead path runs for every
  email; the ORM needs two or three statements (and a savepoint) for an
  insert-if-absent, a single INSERT … ON CONFLICT needs one.
- `describe_db_error`: database errors described without their message.
  PostgreSQL's messages quote the offending values (a duplicate key's email
  and phone, a value too long); these texts go to logs, job rows and alert
  emails, so they keep the error type and SQLSTATE only.
"""

from django.db import DatabaseError, connection


def insert_on_conflict(instance, *, on_conflict: str, returning: str = ""):
    """INSERT `instance` as `save()` would (defaults, auto_now, field conversions), plus `on_conflict`.

    `on_conflict` is SQL that PostgreSQL and SQLite share (ON CONFLICT … DO
    NOTHING / DO UPDATE … WHERE …). Returns the RETURNING row, None when the
    conflict clause wrote nothing.
    """
    opts = type(instance)._meta
    fields = [
        field for field in opts.concrete_fields
        if not field.generated and not (field.primary_key and getattr(instance, field.attname) is None)
    ]  # fmt: skip
    sql = "INSERT INTO {table} ({columns}) VALUES ({placeholders}) {on_conflict}{returning}".format(
        table=connection.ops.quote_name(opts.db_table),
        columns=", ".join(connection.ops.quote_name(field.column) for field in fields),
        placeholders=", ".join(["%s"] * len(fields)),
        on_conflict=on_conflict,
        returning=f" RETURNING {returning}" if returning else "",
    )
    params = [field.get_db_prep_save(field.pre_save(instance, add=True), connection) for field in fields]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone() if returning else None


def describe_db_error(exc: BaseException) -> str:
    if not isinstance(exc, DatabaseError):
        return type(exc).__name__
    sqlstate = getattr(exc.__cause__, "sqlstate", None)
    return f"{type(exc).__name__} (SQLSTATE {sqlstate})" if sqlstate else type(exc).__name__
