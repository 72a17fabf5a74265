"""Database helpers shared by email lead tracking and the CRM lead processor.

- `describe_db_error`: database errors described without their message.
  PostgreSQL's messages quote the offending values (a duplicate key's email
  and phone, a value too long); these texts go to logs, job rows and alert
  emails, so they keep the error type and SQLSTATE only.

One-statement upserts (`insert_on_conflict`) are in config/db.py, shared with the job layer.
"""

from django.db import DatabaseError


def describe_db_error(exc: BaseException) -> str:
    if not isinstance(exc, DatabaseError):
        return type(exc).__name__
    sqlstate = getattr(exc.__cause__, "sqlstate", None)
    return f"{type(exc).__name__} (SQLSTATE {sqlstate})" if sqlstate else type(exc).__name__
