"""Calls from an event loop, batched: many coroutines' items in one call, on a thread of their own.

`Batches(name, work)`: `batches.add(item)` returns a future that is done, with
the item's result, once `work(items)` (synchronous: a service call, one
transaction) has run for that item, with the items every other coroutine
added while the previous batch was running. So under load the number of
transactions stays low and the event loop hands work to a thread once per
batch, not once per item; when idle an item runs at once. Not a queue with a
timer: waiting for a batch to fill would add that wait to every call.

`work` returns one result per item, in order. A subclass may have it return
more and override `batch_done`, which runs on the event loop after `work`
returned (committed). `key` keeps items of the same key in separate batches;
the rest wait a turn.

One item must not cost the others their write: a batch that fails with an
error of an item's own values (ITEM_ERRORS: a value the database refuses, a
key already taken) runs again in halves, halved again until the items at
fault fail alone and the rest are written. So `work` must write nothing when
it fails (one transaction, or one statement), and each half's output is given
to `batch_done` in turn. Any other failure (the database is down) fails every
item of the batch at once; the caller decides what a failure means.

The thread keeps its database connection between batches and returns it
(to the pool, with PostgreSQL) after IDLE_SECONDS without items, or at once
after a failed batch. Cancelling the future (or a coroutine awaiting it)
does not take its item out of the batch.
"""

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from django.db import DataError, IntegrityError, connection

IDLE_SECONDS = 5
BATCH_MAX = 500
# Raised by one item's values, not by the database's state: psycopg raises UnicodeEncodeError for text that
# has no UTF-8 form (an unpaired surrogate) before anything is sent.
ITEM_ERRORS = (DataError, IntegrityError, UnicodeEncodeError)


class Batches:
    def __init__(self, name: str, work: Callable[[list], list], *, key=None, max_size: int = BATCH_MAX):
        self.name, self._work, self._key, self._max_size = name, work, key, max_size
        self._pending: list[tuple[object, asyncio.Future]] = []
        self._runner: asyncio.Task | None = None
        self._wake: asyncio.Event | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)

    def add(self, item) -> asyncio.Future:
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        # Read here so that a failure nobody awaits any more (the caller was cancelled) is not logged by
        # asyncio with its message, which may quote the values written.
        done.add_done_callback(_failure_retrieved)
        self._pending.append((item, done))
        if self._runner is None or self._runner.done() or self._runner.get_loop() is not loop:
            self._wake = asyncio.Event()
            self._runner = loop.create_task(self._run_batches(), name=self.name)
        self._wake.set()
        return done

    async def run(self, item):
        """The item's result; a caller cancelled meanwhile leaves its item in the batch."""
        return await asyncio.shield(self.add(item))

    def wait_idle(self) -> None:
        """From outside the event loop (tests, shutdown): once the work already handed to the batch's one thread,
        which runs it in order, has finished; a loop that closed mid-batch leaves its statement running there."""
        self._executor.submit(int).result()

    def batch_done(self, output) -> list:
        """What `work` returned for a batch, on the event loop once it has returned: a result per item."""
        return output

    async def _run_batches(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                while self._pending:
                    await self._run_batch(loop)
                self._wake.clear()
                try:
                    async with asyncio.timeout(IDLE_SECONDS):
                        await self._wake.wait()
                except TimeoutError:
                    if not self._pending:
                        return
        finally:
            # Idle, or the loop is closing: the thread gives its connection back after any statement
            # still running, without the loop.
            self._executor.submit(_close_connection)

    async def _run_batch(self, loop) -> None:
        batch, seen, waiting = [], set(), []
        for entry in self._pending:
            key = self._key(entry[0]) if self._key else None
            if len(batch) >= self._max_size or (key is not None and key in seen):
                waiting.append(entry)
            else:
                seen.add(key)
                batch.append(entry)
        self._pending = waiting
        try:
            runs = await loop.run_in_executor(self._executor, _work_in_thread, self._work, [i for i, _ in batch])
        except Exception as exc:  # the thread takes no more work (the interpreter is shutting down)
            runs = [(len(batch), None, exc)]
        for size, output, error in runs:
            entries, batch = batch[:size], batch[size:]
            self._settle(entries, output, error)

    def _settle(self, entries: list, output, error: Exception | None) -> None:
        """Each entry's future done: with its result from `batch_done(output)`, or failed with `error`."""
        if error is None:
            try:
                results = self.batch_done(output)
            except Exception as exc:
                error = exc
        if error is not None:
            for _, done in entries:
                if not done.done():
                    done.set_exception(error)
            return
        for (_, done), result in zip(entries, results, strict=True):
            if not done.done():
                done.set_result(result)


def _work_in_thread(work, items: list) -> list[tuple[int, object, Exception | None]]:
    """`work(items)` as runs of (how many of the items, work's output, error) in the items' order: one run,
    unless an item's values failed it (ITEM_ERRORS), then the runs of each half in turn."""
    try:
        return [(len(items), work(items), None)]
    except ITEM_ERRORS as exc:
        if len(items) == 1:
            return [(1, None, exc)]
    except Exception as exc:
        connection.close()  # a broken connection is not reused for the next batch
        return [(len(items), None, exc)]
    half = len(items) // 2
    return _work_in_thread(work, items[:half]) + _work_in_thread(work, items[half:])


def _failure_retrieved(done: asyncio.Future) -> None:
    if not done.cancelled():
        done.exception()


def _close_connection() -> None:
    connection.close()  # looked up here, in the batches' thread: its own connection
