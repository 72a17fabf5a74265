"""What the operators' backfill commands share: one `--since` parser, `--dry-run`, a progress line."""

import argparse
from datetime import UTC, datetime, time


def since_moment(value: str) -> datetime:
    """An argparse type: YYYY-MM-DD (midnight UTC) or an ISO 8601 date-time (UTC when it names no offset)."""
    try:
        moment = datetime.fromisoformat(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{value!r} is not a date (YYYY-MM-DD) or an ISO 8601 date-time") from exc
    if len(value) == 10:
        moment = datetime.combine(moment.date(), time.min)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def add_since_argument(parser, *, what: str, name: str = "--since", required: bool = True):
    parser.add_argument(
        name,
        dest="since",
        type=since_moment,
        required=required,
        metavar="DATE",
        help=f"{what} on or after DATE: YYYY-MM-DD (midnight UTC) or an ISO 8601 date-time.",
    )


def add_dry_run_argument(parser):
    parser.add_argument("--dry-run", action="store_true", help="Show what would change; change nothing.")


def progress(stdout, done: int, total: int, **counts):
    summary = ", ".join(f"{name} {count}" for name, count in counts.items())
    stdout.write(f"\r{done}/{total} leads: {summary}", ending="")
    stdout.flush()
