import uuid
from dataclasses import dataclass
from datetime import datetime

# A row's id in the specs of jobs.enqueue_many_with_row, written before the row exists: in a key, and as a payload
# value. Random per process, so that no text a caller puts in a key or payload can be taken for it.
ROW_ID = f"row-id-{uuid.uuid4().hex}"


@dataclass(frozen=True)
class JobSpec:
    """One job for `jobs.enqueue_many`: the arguments of `jobs.enqueue` less `dispatch`."""

    kind: str
    payload: dict
    key: str
    run_after: datetime | None = None
    max_attempts: int | None = None
    store_id: int | None = None  # the store whose data it handles: the admin shows it to that store's staff
