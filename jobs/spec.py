from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class JobSpec:
    """One job for `jobs.enqueue_many`: the arguments of `jobs.enqueue` less `dispatch`."""

    kind: str
    payload: dict
    key: str
    run_after: datetime | None = None
    max_attempts: int | None = None
    store_id: int | None = None  # the store whose data it handles: the admin shows it to that store's staff
