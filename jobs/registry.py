"""Which function runs each job kind. Handler modules register with @handler("kind")."""

from collections.abc import Callable

_handlers: dict[str, Callable] = {}


def handler(kind: str):
    def register(func: Callable) -> Callable:
        if _handlers.get(kind, func) is not func:
            raise ValueError(f"job kind {kind!r} already has a handler")
        _handlers[kind] = func
        return func

    return register


def get_handler(kind: str) -> Callable | None:
    return _handlers.get(kind)


def registered_kinds() -> list[str]:
    return sorted(_handlers)
