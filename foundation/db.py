"""Database helpers shared by every app: one-statement INSERT … ON CONFLICT, a row and the rows that go with it
in one statement, UPDATEs of many rows in one round trip, text PostgreSQL can store, and database errors described
safely.

The ORM needs two or three statements and a savepoint for an insert-if-absent
(`get_or_create`), and `bulk_create(ignore_conflicts=True)` cannot say which
rows it wrote. A single INSERT … ON CONFLICT … RETURNING does both in one
round trip.
"""

import functools
import re
import traceback
from collections.abc import Sequence

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connection, connections

# PostgreSQL's protocol carries at most 65535 parameters per statement.
MAX_PARAMETERS = 65535
# Characters PostgreSQL cannot store: NUL (text refuses it, jsonb refuses "\u0000") and unpaired surrogates
# (no UTF-8 encoding exists for them). Requests holding them are refused (foundation.parsers, config.middleware);
# capture that keeps what it is given removes them (storable_text).
UNSTORABLE_CHARACTERS = re.compile(r"[\x00\ud800-\udfff]")


def storable_text(text: str) -> str:
    """`text` without the characters PostgreSQL cannot store."""
    return UNSTORABLE_CHARACTERS.sub("", text)


def insert_on_conflict(instance, *, on_conflict: str, returning: str = ""):
    """INSERT `instance` as `save()` would (defaults, auto_now, field conversions), plus `on_conflict`.

    `on_conflict` is PostgreSQL's conflict clause (ON CONFLICT … DO NOTHING /
    DO UPDATE … WHERE …). Returns the RETURNING row, None when the
    conflict clause wrote nothing (or when nothing is returned).
    """
    rows = insert_many_on_conflict([instance], on_conflict=on_conflict, returning=returning)
    return rows[0] if rows else None


def insert_many_on_conflict(instances: Sequence, *, on_conflict: str, returning: str = "") -> list[tuple]:
    """INSERT several instances of one model in one multi-row statement (batched under PostgreSQL's
    parameter limit), plus `on_conflict`.

    Returns the RETURNING rows of the rows actually written, in no guaranteed
    order: return a column that identifies each row, such as a unique key, to
    match them up. Rows skipped by the conflict clause return nothing. Primary
    keys are not set on the instances.
    """
    if not instances:
        return []
    model = type(instances[0])
    opts = model._meta
    auto_pk = getattr(instances[0], opts.pk.attname) is None
    if any(type(obj) is not model or (getattr(obj, opts.pk.attname) is None) != auto_pk for obj in instances):
        raise ValueError("insert_many_on_conflict: instances must be of one model, all with or all without a pk")
    fields, head, row_placeholders = insert_layout(model, auto_pk=auto_pk)
    db = connections[DEFAULT_DB_ALIAS]  # the connection itself: the proxy's lookup per field costs more than the field
    tail = f" {on_conflict}" + (f" RETURNING {returning}" if returning else "")
    batch = max(MAX_PARAMETERS // len(fields), 1)
    written = []
    with db.cursor() as cursor:
        for start in range(0, len(instances), batch):
            chunk = instances[start : start + batch]
            params = [
                field.get_db_prep_save(field.pre_save(obj, add=True), db) for obj in chunk for field in fields
            ]
            cursor.execute(head + ", ".join([row_placeholders] * len(chunk)) + tail, params)
            if returning:
                written.extend(cursor.fetchall())
    return written


@functools.cache
def insert_layout(model, auto_pk: bool) -> tuple[list, str, str]:
    """(the fields an INSERT of `model` writes, "INSERT INTO table (columns) VALUES ", one row's placeholders),
    worked out once per model; `auto_pk`: the database gives the primary key."""
    fields = [
        field for field in model._meta.concrete_fields
        if not field.generated and not (field.primary_key and auto_pk)
    ]  # fmt: skip
    quote = connection.ops.quote_name
    head = "INSERT INTO {table} ({columns}) VALUES ".format(
        table=quote(model._meta.db_table), columns=", ".join(quote(field.column) for field in fields)
    )
    return fields, head, "(" + ", ".join(["%s"] * len(fields)) + ")"


def insert_values(instance) -> list:
    """The parameters of `instance`'s INSERT (an unsaved instance with an automatic primary key), converted as
    save() converts them. Runs the fields' pre_save now: auto_now values are set on the instance, so that
    what is built from them before the INSERT (insert_with's `then`) sees the values written."""
    if instance.pk is not None:
        raise ValueError("insert_values: the database gives the primary key; this instance has one")
    fields, _, _ = insert_layout(type(instance), auto_pk=True)
    db = connections[DEFAULT_DB_ALIAS]
    return [field.get_db_prep_save(field.pre_save(instance, add=True), db) for field in fields]


def insert_with(instance, values: Sequence, *, then: str = "", params: Sequence = ()) -> list[tuple]:
    """INSERT `instance` (its `insert_values`) and run `then` in ONE statement: one round trip to PostgreSQL.

    `then` is a data-modifying statement with a RETURNING clause whose first column is never NULL; it reads the
    new row's primary key as `(SELECT pk FROM new_row)`. Both run in a data-modifying CTE, so they commit or fail
    together, in the caller's transaction. Sets the instance's primary key (and marks it saved) and returns
    `then`'s RETURNING rows. The ORM's create() compiles its INSERT on every call and needs a statement of its
    own for each of the rows that go with it (intake's lead and its jobs, bench/intake).
    """
    model = type(instance)
    opts = model._meta
    _, head, row_placeholders = insert_layout(model, auto_pk=True)
    db = connections[DEFAULT_DB_ALIAS]
    insert = f"{head}{row_placeholders} RETURNING {db.ops.quote_name(opts.pk.column)} AS pk"
    sql = insert
    if then:
        sql = f"WITH new_row AS ({insert}), written AS ({then}) "
        sql += "SELECT new_row.pk, written.* FROM new_row LEFT JOIN written ON TRUE"
    with db.cursor() as cursor:
        cursor.execute(sql, [*values, *params])
        rows = cursor.fetchall()
    setattr(instance, opts.pk.attname, rows[0][0])
    instance._state.adding = False
    instance._state.db = db.alias
    return [row[1:] for row in rows if then and row[1] is not None]


def update_many(instances: Sequence, fields: Sequence[str]) -> None:
    """UPDATE these columns of each instance to its own values, converted as save() converts them
    (auto_now included), in one round trip: psycopg's executemany pipelines the statements.

    bulk_update builds a CASE per column with a WHEN per row through the query
    compiler, and save(update_fields=...) a compiled statement per row: either cost
    more CPU than the rest of the work on the paths that use this (a thousand
    prototypes completing within seconds in bench/sse, tool calls in bench/mcp).
    """
    if not instances:
        return
    opts = type(instances[0])._meta
    columns = [opts.get_field(name) for name in fields]
    db = connections[DEFAULT_DB_ALIAS]
    quote = db.ops.quote_name
    assignments = ", ".join(f"{quote(field.column)} = %s" for field in columns)
    statement = f"UPDATE {quote(opts.db_table)} SET {assignments} WHERE {quote(opts.pk.column)} = %s"
    rows = [
        [*(field.get_db_prep_save(field.pre_save(obj, add=False), db) for field in columns), obj.pk]
        for obj in instances
    ]
    with db.cursor() as cursor:
        cursor.executemany(statement, rows)


def fetch_models(model, sql: str, params: Sequence = ()) -> list:
    """Instances of `model` from SQL with a `{columns}` placeholder for its column list.

    `fetch_models(Job, "UPDATE jobs_job SET … WHERE id = %s RETURNING {columns}", [pk])`:
    what `Model.objects.raw()` does, minus its column resolution and result
    description on every call, which cost more CPU than the query itself on
    the hot paths that use this (claiming a job, reading a tracked user for
    delivery, bench/tracking/sync). The row layout is worked out once per model.
    """
    columns, attnames, converters = _row_layout(model)
    db = connections[DEFAULT_DB_ALIAS]
    with db.cursor() as cursor:
        cursor.execute(sql.format(columns=columns), params)
        rows = cursor.fetchall()
    instances = []
    for row in rows:
        values = list(row)
        for index, field_converters, expression in converters:
            for convert in field_converters:
                values[index] = convert(values[index], expression, db)
        instances.append(model.from_db(db.alias, attnames, values))
    return instances


@functools.cache
def _row_layout(model):
    """(column list SQL, attnames, [(index, converters, expression)]) as the ORM's compiler would apply them."""
    fields = model._meta.concrete_fields
    columns = ", ".join(connection.ops.quote_name(field.column) for field in fields)
    converters = []
    for index, field in enumerate(fields):
        expression = field.get_col(model._meta.db_table)
        field_converters = connection.ops.get_db_converters(expression) + field.get_db_converters(connection)
        if field_converters:
            converters.append((index, field_converters, expression))
    return columns, [field.attname for field in fields], converters


def describe_db_error(exc: BaseException) -> str:
    """A database error without its message: PostgreSQL's messages quote the offending values
    (a duplicate key's email and phone), and these texts go to logs, job rows and alert emails,
    so they keep the error type and SQLSTATE only."""
    if not isinstance(exc, DatabaseError):
        return type(exc).__name__
    sqlstate = getattr(exc.__cause__, "sqlstate", None)
    return f"{type(exc).__name__} (SQLSTATE {sqlstate})" if sqlstate else type(exc).__name__


def traceback_scrubbed(exc: BaseException) -> str:
    """The traceback of `exc` as text, with every database error's message in its chain withheld:
    PostgreSQL's messages quote the offending values (a duplicate key's email, a value too long), and
    this text goes to job rows, the admin and alert emails. Types and frames stay for staff."""
    formatted = traceback.TracebackException.from_exception(exc)
    seen, link = set(), formatted
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        if issubclass(link.exc_type, DatabaseError) or link.exc_type.__module__.startswith("psycopg"):
            link._str = "(message withheld: it can quote values)"  # what format() prints after the type
        link = link.__cause__ or link.__context__
    return "".join(formatted.format())
