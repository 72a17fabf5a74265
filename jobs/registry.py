"""Which function runs each job kind. Handler modules register with @handler("kind")."""

from collections.abc import Callable

_handlers: dict[str, Callable] = {}
_many_handlers: dict[str, Callable] = {}
_unbatched: set[str] = set()
_concurrency: dict[str, int] = {}


def handler(kind: str, *, batched: bool = True, concurrency: int | None = None):
    """Register the function that runs `kind`.

    `batched=False` is for long jobs meant to run side by side (sync shards,
    mailbox polls): each gets a run message of its own at commit, so each can
    go to a different worker process, instead of sharing a batched message
    whose jobs one worker runs one after another (jobs/dispatch.py).

    `concurrency=N` lets at most N jobs of the kind run at once across all
    workers (a rate-limited upstream): a claim beyond it is refused and the job
    is put back a few seconds later (services.job_claim).
    """
    if concurrency is not None and concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    if (concurrency is not None or not batched) and kind in _many_handlers:
        raise ValueError(f"job kind {kind!r} has a handler of many: its jobs share run messages, with no limit")

    def register(func: Callable) -> Callable:
        if _handlers.get(kind, func) is not func:
            raise ValueError(f"job kind {kind!r} already has a handler")
        _handlers[kind] = func
        if not batched:
            _unbatched.add(kind)
        if concurrency is not None:
            _concurrency[kind] = concurrency
        return func

    return register


def handler_of_many(kind: str):
    """Register, beside the kind's handler, a function that runs several of its jobs together.

    The worker claims the jobs of `kind` in one run message in one statement,
    calls `func(jobs)` once, and finishes the jobs it did not hand back in one
    statement, as succeeded. `func` returns the jobs it left for the handler
    (one that needs the handler's own outcome, a permanent failure), which then
    run one at a time, in the same attempt. If `func` raises, every job runs
    alone. So `func` writes all or nothing (one transaction), and what it writes
    for a job is what the handler would. Not for kinds with a concurrency limit
    or without run messages of their own (`handler(batched=False)`).
    """

    def register(func: Callable) -> Callable:
        if kind in _concurrency or kind in _unbatched:
            raise ValueError(f"job kind {kind!r} runs alone or under a limit: no handler of many")
        if _many_handlers.get(kind, func) is not func:
            raise ValueError(f"job kind {kind!r} already has a handler of many")
        _many_handlers[kind] = func
        return func

    return register


def get_handler_of_many(kind: str) -> Callable | None:
    return _many_handlers.get(kind)


def get_handler(kind: str) -> Callable | None:
    return _handlers.get(kind)


def is_batched(kind: str) -> bool:
    return kind not in _unbatched


def concurrency_limit(kind: str) -> int | None:
    return _concurrency.get(kind)


def registered_kinds() -> list[str]:
    return sorted(_handlers)
