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

The thread keeps its database connection between batches and returns it
(to the pool, with PostgreSQL) after IDLE_SECONDS without items, or at once
after a failed batch. A batch that fails fails every item in it; the caller
decides what that means. Cancelling the future (or a coroutine awaiting it)
does not take its item out of the batch.
"""

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from django.db import connection

IDLE_SECONDS = 5
BATCH_MAX = 500


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
            output = await loop.run_in_executor(self._executor, _work_in_thread, self._work, [i for i, _ in batch])
            results = self.batch_done(output)
        except Exception as exc:
            for _, done in batch:
                if not done.done():
                    done.set_exception(exc)
            return
        for (_, done), result in zip(batch, results, strict=True):
            if not done.done():
                done.set_result(result)


def _work_in_thread(work, items: list):
    try:
        return work(items)
    except Exception:
        connection.close()  # a broken connection is not reused for the next batch
        raise


def _failure_retrieved(done: asyncio.Future) -> None:
    if not done.cancelled():
        done.exception()


def _close_connection() -> None:
    connection.close()  # looked up here, in the batches' thread: its own connection
