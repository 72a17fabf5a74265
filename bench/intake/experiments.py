"""Bench-only experiments: candidate project changes, tried without touching the project's code.

Switched on by `BENCH_EXPERIMENTS=name[,name...]` in the environment of the
processes that serve the bench (run.py passes `--experiments`, or
`--variant-experiments` for a second set of daphne processes measured side by
side). The benchmark's own figures are taken with none of them.

The experiments that reached the targets (one INSERT and one run message for a
lead's jobs, a shared Redis pool for the cache, the async-capable request-id
middleware, the classifier over plain HTTP, two daphne processes) are applied
in the project now; bench/intake/README.md has their measurements. What is left
was measured and not applied:

- `async_view`: POST /api/leads served by bench/intake/async_intake.py, an async
  view that awaits the classifier on the event loop and runs only the project's
  lead_create (DB + jobs) in a thread. Every client's upstream call was in
  flight at once (100/100) and daphne's CPU per request fell with fewer
  threads contending for the GIL, but throughput moved within the noise: CPU,
  not waiting, is the limit here. The structural fix if slow upstreams ever
  must run with many more requests in flight than threads.
"""

import os

KNOWN = ("async_view",)
ENABLED = tuple(x.strip() for x in os.environ.get("BENCH_EXPERIMENTS", "").split(",") if x.strip())
unknown = set(ENABLED) - set(KNOWN)
if unknown:
    raise RuntimeError(f"unknown BENCH_EXPERIMENTS {sorted(unknown)}; known: {KNOWN}")


def urlpatterns():
    """Routes that take precedence over the project's (bench/intake/urls.py puts them first)."""
    if "async_view" not in ENABLED:
        return []
    from django.urls import path

    from bench.intake.async_intake import AsyncLeadCreateView

    return [path("api/leads", AsyncLeadCreateView.as_view(), name="bench-async-leads")]
