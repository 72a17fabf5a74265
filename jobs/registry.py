"""Which function runs each job kind. Handler modules register with @handler("kind")."""

from collections.abc import Callable

_handlers: dict[str, Callable] = {}
_unbatched: set[str] = set()


def handler(kind: str, *, batched: bool = True):
    """Register the function that runs `kind`.

    `batched=False` is for long jobs meant to run side by side (sync shards,
    mailbox polls): each gets a run message of its own at commit, so each can
    go to a different worker process, instead of sharing a batched message
    whose jobs one worker runs one after another (jobs/dispatch.py).
    """

    def register(func: Callable) -> Callable:
        if _handlers.get(kind, func) is not func:
            raise ValueError(f"job kind {kind!r} already has a handler")
        _handlers[kind] = func
        if not batched:
            _unbatched.add(kind)
        return func

    return register


def get_handler(kind: str) -> Callable | None:
    return _handlers.get(kind)


def is_batched(kind: str) -> bool:
    return kind not in _unbatched


def registered_kinds() -> list[str]:
    return sorted(_handlers)
