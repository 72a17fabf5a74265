"""The longest test files first, so that none is left running alone at the end on one of `make test`'s workers.

scripts/pytest-workers hands out whole files in collection order (`--dist loadfile`, `--no-loadscope-reorder`).
A file's weight is how long it took in the last run that ran it (kept in pytest's cache); a file that has not run
here yet weighs what its tests that start processes or a browser would, a few seconds each. The sort is stable:
the tests of a file keep their order.
"""

from collections import Counter

import pytest

CACHE_KEY = "leadgen/file-seconds"
SECONDS_PER_PROCESS_TEST = 5.0


def _file(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def pytest_collection_modifyitems(config, items):
    measured = config.cache.get(CACHE_KEY, {}) if getattr(config, "cache", None) else {}
    estimated: dict[str, float] = {}
    for item in items:
        starts_processes = item.get_closest_marker("slow") or item.get_closest_marker("browser")
        path = _file(item.nodeid)
        estimated[path] = estimated.get(path, 0.0) + (SECONDS_PER_PROCESS_TEST if starts_processes else 0.0)
    items.sort(key=lambda item: -measured.get(_file(item.nodeid), estimated[_file(item.nodeid)]))
    _tell_apart(items)


def _tell_apart(items) -> None:
    """schemathesis names its test of each API operation `test[POST /api/leads]`, but on this pytest their node
    ids leave the operation out, and xdist, which tells items apart by node id, would run one operation of each
    such test. Each gets the operation its name carries."""
    ids = Counter(item.nodeid for item in items)
    for item in items:
        if ids[item.nodeid] > 1 and item.name.endswith("]") and "[" in item.name:
            item._id = item._id.with_params(item.name.split("[", 1)[1][:-1])  # pytest's structured node id
    if duplicated := [nodeid for nodeid, n in Counter(item.nodeid for item in items).items() if n > 1]:
        raise pytest.UsageError(f"tests with the same node id would run once under make test: {duplicated}")


class _FileSeconds:
    """Adds up each file's setup, call and teardown times, and keeps them for the next run's order."""

    def __init__(self):
        self.seconds: dict[str, float] = {}

    def pytest_runtest_logreport(self, report):
        path = _file(report.nodeid)
        self.seconds[path] = self.seconds.get(path, 0.0) + report.duration

    def pytest_sessionfinish(self, session):
        kept = session.config.cache.get(CACHE_KEY, {})
        session.config.cache.set(CACHE_KEY, {**kept, **{path: round(s, 1) for path, s in self.seconds.items()}})


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    # On a worker the controller receives every report: it alone writes the cache.
    if getattr(config, "cache", None) is not None and not hasattr(config, "workerinput"):
        config.pluginmanager.register(_FileSeconds(), "leadgen-file-seconds")
