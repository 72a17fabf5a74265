"""Which function runs each job kind. Handler modules register with @handler("kind")."""

from collections.abc import Callable

_handlers: dict[str, Callable] = {}
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


def get_handler(kind: str) -> Callable | None:
    return _handlers.get(kind)


def is_batched(kind: str) -> bool:
    return kind not in _unbatched


def concurrency_limit(kind: str) -> int | None:
    return _concurrency.get(kind)


def registered_kinds() -> list[str]:
    return sorted(_handlers)
