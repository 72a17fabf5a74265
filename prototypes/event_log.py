"""The event log: every PrototypeEvent is written here and announced to the open streams once committed
(prototypes.broadcast).

An event is numbered per prototype by the same statement that inserts it (DML in WITH): every step of a
generation and of the processor logs one, so this is on the path of every stream. The writes that log
many events at once (the relays' steps, starts and completions) return them, and the Batches below
announce each batch's events on the event loop once its transaction has committed.
"""

import json

from django.db import connection, transaction
from django.utils import timezone

from foundation import batching
from prototypes import broadcast
from prototypes.models import Prototype, PrototypeEvent


def event_add(*, prototype_id: int, kind: str, data: dict) -> PrototypeEvent:
    """Log one event (numbered per prototype) and announce it to open streams once committed."""
    q = connection.ops.quote_name
    table, events_table = q(Prototype._meta.db_table), q(PrototypeEvent._meta.db_table)
    now = timezone.now()
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH numbered AS (UPDATE {table} SET events = events + 1 WHERE id = %s RETURNING id, events)"
            f" INSERT INTO {events_table} (prototype_id, number, kind, data, created_at)"
            " SELECT id, events, %s, %s::jsonb, %s FROM numbered RETURNING id, number",
            [prototype_id, kind, json.dumps(data), now],
        )
        pk, number = cursor.fetchone()
    event = PrototypeEvent(pk=pk, prototype_id=prototype_id, number=number, kind=kind, data=data, created_at=now)
    transaction.on_commit(lambda: broadcast.announce([event]))
    return event


def progress(prototype: Prototype, status: str, **extra) -> PrototypeEvent:
    """Log a progress step of the prototype as it stands."""
    data = {"state": prototype.state, "status": status, "title": prototype.title, **extra}
    return event_add(prototype_id=prototype.pk, kind=PrototypeEvent.Kind.PROGRESS, data=data)


def relay_steps_log(*, steps: list[tuple[int, str, int, str]]) -> list[PrototypeEvent]:
    """What the relays of V0 streams saw, `(prototype_id, status, step, title)` each: logged (and the title
    kept) for every prototype that has not ended; at most one step per prototype. Returns the logged
    events, for the relays' Batches to announce on the event loop, all at once.

    The relays' hot path (an event per V0 step per generation), written in batches (prototypes.relay's
    step_log): one statement, in autocommit, numbers the events, keeps the titles and inserts the events
    of the whole batch (DML in WITH), instead of a locked read, two writes and a transaction per step;
    bench/sse measured the difference.
    """
    if not steps:
        return []
    ids = [prototype_id for prototype_id, *_ in steps]
    if len(set(ids)) != len(ids):
        raise ValueError("at most one step per prototype in a batch")
    q = connection.ops.quote_name
    table, events_table = q(Prototype._meta.db_table), q(PrototypeEvent._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            "WITH seen AS (SELECT * FROM unnest(%s::bigint[], %s::text[], %s::int[], %s::text[])"
            " AS s(id, status, step, title)),"
            f" numbered AS (UPDATE {table} p SET events = p.events + 1,"
            " title = CASE WHEN seen.title = '' THEN p.title ELSE seen.title END"
            " FROM seen WHERE p.id = seen.id AND p.state <> ALL(%s)"
            " RETURNING p.id, p.events, p.state, p.title, seen.status, seen.step)"
            f" INSERT INTO {events_table} (prototype_id, number, kind, data, created_at)"
            " SELECT id, events, %s, jsonb_build_object('state', state, 'status', status, 'title', title,"
            " 'step', step), clock_timestamp() FROM numbered RETURNING prototype_id, number, data::text, created_at",
            [ids, [status for _, status, _, _ in steps], [step for _, _, step, _ in steps],
             [title[:200] for *_, title in steps], list(Prototype.TERMINAL), PrototypeEvent.Kind.PROGRESS],
        )  # fmt: skip
        rows = cursor.fetchall()
    return progress_logged(rows)


def progress_logged(rows) -> list[PrototypeEvent]:
    """The progress events a statement logged, from its `prototype_id, number, data::text, created_at`."""
    kind = PrototypeEvent.Kind.PROGRESS
    return [
        PrototypeEvent(prototype_id=pk, number=number, kind=kind, data=json.loads(data), created_at=created_at)
        for pk, number, data, created_at in rows
    ]


class Batches(batching.Batches):
    """foundation.batching's batches for writes that log events: `work(items)` returns a result per item and
    the events it logged, announced here once it returns (committed), on the event loop.

    So a thousand relays starting or stepping at once cost a few statements, not a thread trip each, and
    never wait behind other work of the shared thread pool.
    """

    def batch_done(self, output) -> list:
        results, logged = output
        broadcast.announce(logged)
        return results
