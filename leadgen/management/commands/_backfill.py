"""Shared arguments and progress output of the lead backfill commands."""

from datetime import UTC, datetime, time

from django.core.management.base import CommandError
from django.utils.dateparse import parse_date


def add_backfill_arguments(parser):
    parser.add_argument("--since", required=True, help="YYYY-MM-DD: leads created on or after this day (UTC).")
    parser.add_argument("--dry-run", action="store_true", help="Show what would change; change nothing.")


def since_datetime(value: str) -> datetime:
    day = parse_date(value)
    if day is None:
        raise CommandError(f"--since must be a date as YYYY-MM-DD, not {value!r}")
    return datetime.combine(day, time.min, tzinfo=UTC)


def progress(stdout, done: int, total: int, **counts):
    summary = ", ".join(f"{name} {count}" for name, count in counts.items())
    stdout.write(f"\r{done}/{total} leads: {summary}", ending="")
    stdout.flush()
