"""The worker threads the MCP server's blocking calls (Kapa, the docs site, the database, the cache) run in.

A pool of our own, not anyio's worker threads: those are stopped only when
the task that first used them ends, which for the MCP server is the session
manager's task that runs until the process ends, so the idle threads kept
daphne from exiting. A ThreadPoolExecutor's idle threads end with the process.
Not the event loop's default executor either: it has min(32, CPUs + 4)
threads, which would cap the tool calls in flight at six on two cores.
"""

from concurrent.futures import ThreadPoolExecutor

from asgiref.sync import sync_to_async

WORKER_THREADS = 64

_workers = ThreadPoolExecutor(max_workers=WORKER_THREADS, thread_name_prefix="mcp-worker")


async def in_worker(function, /, *args, **kwargs):
    """`function(*args, **kwargs)` in a worker thread, with the caller's context variables."""
    return await sync_to_async(function, thread_sensitive=False, executor=_workers)(*args, **kwargs)
