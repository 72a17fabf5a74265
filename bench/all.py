"""Every benchmark in turn on this host, then one table of their figures against their targets.

    .venv/bin/python bench/all.py [--quick] [--only jobs,blog] [--no-run]

Each benchmark runs as its own `make bench-<name>` target runs it (those that need PostgreSQL and Redis under
`scripts/with-services`, with throwaway servers of their own), one after another, so the figures were taken
together on one host. The table gives each figure, its baseline, their ratio, the target and whether it is
met, then the host (CPU model, cores) and its load average before and after. A full run writes each
benchmark's own results.json and puts the table into bench/README.md between the `bench-results` markers.

--quick runs each in its smallest configuration (seconds per phase, hundreds of items rather than
thousands), its results under bench/out/quick/ and the table printed only: it proves the benchmarks run,
its figures are not the benchmarks'. --no-run makes the table from the results files already there.

Exit status: 0 every benchmark ran and met its targets, 1 a target missed, 2 a benchmark could not run.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "bench" / "README.md"
QUICK_DIR = ROOT / "bench" / "out" / "quick"  # git-ignored
BEGIN, END = "<!-- bench-results: begin (make bench writes this table) -->", "<!-- bench-results: end -->"


@dataclass
class Row:
    figure: str
    value: float | None
    baseline: float | None
    target: str
    met: bool | None
    ratio: float | None = None

    def __post_init__(self):
        if self.ratio is None and self.value is not None and self.baseline:
            self.ratio = self.value / self.baseline


@dataclass
class Bench:
    name: str
    script: str
    results: str
    rows: object  # results.json -> [Row]
    quick: list[str] = field(default_factory=list)
    services: bool = True  # PostgreSQL and Redis, started by scripts/with-services

    def command(self, results: Path) -> list[str]:
        command = [sys.executable, self.script, "--results", str(results)]
        return ["scripts/with-services", *command] if self.services else command


def jobs_rows(r):
    s = r["summary"]
    return [Row("durable jobs/s vs bare Celery's", s["jobs_rate"], s["celery_rate"], f"≥ {s['target']}×", s["met"],
                s["ratio"])]  # fmt: skip


def intake_rows(r):
    rows, s, target_ratio = [], r["summary"]["project"], r["args"]["target_ratio"]
    if one := s.get("scenario1"):
        rows.append(Row("intake leads/s vs bare insert", one["intake_rate"], one["bare_rate"], f"≥ {target_ratio}×",
                        one["met"], one["ratio"]))  # fmt: skip
        if one.get("durable_rate"):  # no target: the comparison with the same promises kept the plain way
            rows.append(Row("intake leads/s vs bare durable (classifier, lead + jobs, Celery message)",
                            one["intake_rate"], one["durable_rate"], "reported", None))  # fmt: skip
    if two := s.get("scenario2"):
        rows.append(Row("intake leads/s, 300 ms classifier, worst round", two["intake_rate_min"], None,
                        f"≥ {two['target_rate']:g}/s, 0 errors", two["met"]))  # fmt: skip
    return rows


def sources_rows(r):
    s = r["summary"]["project"]
    return [Row("webhook leads/s vs web form's", s["webhook_rate"], s["intake_rate"], f"≥ {s['target']}×, 0 errors",
                s["met"], s["ratio"])]  # fmt: skip


def redaction_rows(r):
    tools = r["tools"]
    speed = [t["throughput"]["texts_per_second"] for t in (tools["ours"], tools["presidio"])]
    scoring = [met for check, met in r["checks"].items() if not check.startswith("throughput")]  # speed: next row
    return [
        Row("redaction recall, all classes", tools["ours"]["score"]["recall"], tools["presidio"]["score"]["recall"],
            "≥ 0.99 per class, precision ≥ 0.98", all(scoring)),
        Row("redaction texts/s vs Presidio", *speed, "≥ 10×", r["speedup_over_presidio"] >= 10,
            r["speedup_over_presidio"]),
    ]  # fmt: skip


def imap_rows(r):
    s = r["summary"]
    met = s["ours_median_rate"] >= s["target_rate"] and s["ratio"] >= s["target_ratio"] and s["all_checks_ok"]
    target = f"≥ {s['target_rate']:g}/s and ≥ {s['target_ratio']}×"
    return [Row("emails/s vs django-mailbox", s["ours_median_rate"], s["django_mailbox_median_rate"], target, met,
                s["ratio"])]  # fmt: skip


def hostile_rows(r):
    s = r["summary"]
    baseline = next((row["baseline_ms"] for row in r["rows"] if row["message"] == s["slowest_hostile"]), None)
    return [Row("slowest hostile email, ms (vs the unbounded parser)", s["slowest_hostile_ms"], baseline,
                f"< {s['target_ms']:g} ms", s["target_met"])]  # fmt: skip


def sync_rows(r):
    s = r["summary"]
    slowest = max(s["large_seconds"] + s["small_seconds"])
    spread = max(abs(x - 1) for x in s["large_over_small"])
    return [
        Row("daily sync seconds vs the ideal", slowest, s["ideal_seconds"], "≤ 1.3×", s["worst_vs_ideal"] <= 1.3,
            s["worst_vs_ideal"]),
        Row("1,000,000 users over 10,000", None, None, "±20%", spread <= 0.2, max(s["large_over_small"], key=abs)),
    ]  # fmt: skip


def sse_rows(r):
    ours, bare, met = r["ours"], r["baseline"], r["targets_met"]
    return [
        Row("stream events/s vs bare relay", ours["events_per_s"], bare["events_per_s"], "≥ 0.8×",
            met["events_per_s_ratio"] and met["all_streams_completed"], r["ratio_events_per_s"]),
        Row("upstream→browser p99 ms (vs the relay's)", ours["delay"]["p99_ms"], bare["delay"]["p99_ms"], "< 250 ms",
            met["p99_delay"]),
    ]  # fmt: skip


def scale_rows(r):
    s, met, leads = r["summary"], r["targets_met"], r["summary"]["intake_leads_per_s"]
    return [
        Row("intake leads/s, 2 web processes vs 1", leads["nginx_2_processes"], leads["nginx_1_process"], "≥ 1.5×",
            met["scale_intake"] and met["no_errors"], s["scale_intake"]),
        Row("intake through nginx vs straight", leads["nginx_2_processes"], leads["direct_2_processes"], "≥ 0.9×",
            met["proxy_intake"], s["proxy_intake"]),
    ]  # fmt: skip


def backoffice_rows(r):
    pages, target = r["pages"], r["target"]
    computed, jobs, stock = (pages[name]["p50_ms"] for name in (
        "dashboard cold (30 days, every store)", "jobs list", "jobs list, stock"))  # fmt: skip
    return [
        Row("dashboard p50 ms, computed (30 days, every store)", computed, None,
            f"< {target['dashboard_p50_ms_under']} ms", target["met_cold"]),
        Row("jobs list p50 ms vs stock changelist", jobs, stock, "reported", None),
    ]  # fmt: skip


def chat_rows(r):
    p, ratios = r["parameters"], r["ratios_relay_vs_floor"]
    rows = [
        Row("chat time to first token p50 vs the floor", r["relay"]["ttft_ms_p50"], r["floor"]["ttft_ms_p50"],
            f"≥ {p['target']}×", ratios["ttft_p50"] >= p["target"], ratios["ttft_p50"]),
        Row("chat time to first token p99 vs the floor", r["relay"]["ttft_ms_p99"], r["floor"]["ttft_ms_p99"],
            f"≥ {p['target']}×", ratios["ttft_p99"] >= p["target"], ratios["ttft_p99"]),
        Row("chat tokens/s vs the floor", r["relay"]["tokens_per_s_p50"], r["floor"]["tokens_per_s_p50"],
            f"≥ {p['target']}×", ratios["tokens_per_s_p50"] >= p["target"], ratios["tokens_per_s_p50"]),
        Row("chat CPU per chat vs the floor", None, None, f"≤ {p['cpu_target']}×",
            r["cpu_relay_vs_floor"] <= p["cpu_target"], r["cpu_relay_vs_floor"]),
    ]  # fmt: skip
    if open_loop := r.get("open_loop"):
        rows.append(Row("open loop: added time to first token p99 ms", open_loop["relay"]["added_ttft_ms_p99"], None,
                        f"< {p['open_added_ms']:g} ms", open_loop["target_met"]))  # fmt: skip
        if over_floor := open_loop.get("added_over_floor_ms"):  # no target: what is ours in the time added
            rows.append(Row("open loop: over the floor's, same minute, p99 ms", over_floor["p99"], None, "reported",
                            None))  # fmt: skip
    if scaled := r.get("scaled"):
        rows.append(Row(f"time to first token, {scaled['processes']} processes over 1", None, None,
                        f"≤ {p['scale_target']}×", scaled["target_met"], scaled["ttft_p50_ratio"]))  # fmt: skip
        if scaled.get("floor_ttft_p50_ratio"):  # no target: how far a relay with nothing of ours scales out here
            rows.append(Row(f"the floor's own, {scaled['processes']} processes over 1", None, None, "reported", None,
                            scaled["floor_ttft_p50_ratio"]))  # fmt: skip
    return rows


def mcp_rows(r):
    s = r["summary"]
    rows = [Row("MCP calls/s vs bare SDK server", s["ours"]["calls_per_s"], s["bare"]["calls_per_s"],
                f"≥ {r['settings']['target_ratio']}×", r["target_met"], r["ratio_ours_to_bare"])]  # fmt: skip
    if r.get("ratio_ours_to_durable"):  # no target: the comparison with the same promises kept the plain way
        rows.append(Row("MCP calls/s vs SDK server with auth and a record per call", s["ours"]["calls_per_s"],
                        s["durable"]["calls_per_s"], "reported", None, r["ratio_ours_to_durable"]))  # fmt: skip
    return rows


def blog_rows(r):
    s = r["summary"]
    return [Row("blog warm requests/s vs bare view", s["ours_median_rps"], s["bare_median_rps"],
                f"≥ {r['args']['target_ratio']}×, 1 upstream call per cold burst", r["targets_met"], s["ratio"])]


def privacy_rows(r):
    times, target = r["times"], r["target"]
    under = f"< {target['slowest_under_s']:g} s"
    return [Row(f"{kind} of a person, slowest s", times[kind]["max_s"], None, under,
                times[kind]["max_s"] < target["slowest_under_s"]) for kind in ("export", "erase")]  # fmt: skip


BENCHMARKS = [
    Bench("jobs", "bench/jobs/run.py", "bench/jobs/results.json", jobs_rows,
          ["--count", "300", "--rounds", "1", "--warmup", "20", "--profile-count", "20"]),
    Bench("intake", "bench/intake/run.py", "bench/intake/results.json", intake_rows,
          ["--rounds", "1", "--duration", "2", "--warmup", "1", "--profile-count", "20"]),
    Bench("sources", "bench/sources/run.py", "bench/sources/results.json", sources_rows,
          ["--rounds", "1", "--duration", "2", "--warmup", "1", "--retries", "10", "--profile-count", "10"]),
    Bench("redaction", "bench/tracking/redaction/run.py", "bench/tracking/redaction/results.json", redaction_rows,
          ["--count", "300"]),
    Bench("imap", "bench/imap/run.py", "bench/imap/results.json", imap_rows,
          ["--count", "200", "--rounds", "1", "--warmup", "20"]),
    Bench("imap-hostile", "bench/imap/hostile.py", "bench/imap/hostile_results.json", hostile_rows,
          ["--repeat", "1", "--baseline-timeout", "2"], services=False),
    Bench("sync", "bench/tracking/sync/run.py", "bench/tracking/sync/results.json", sync_rows,
          ["--pending", "200", "--total", "2000", "--rounds", "1"]),
    Bench("sse", "bench/sse/run.py", "bench/sse/results.json", sse_rows,
          ["--streams", "50", "--parts", "10", "--interval", "0.2"]),
    Bench("scale", "bench/scale/run.py", "bench/scale/results.json", scale_rows, ["--quick"]),
    Bench("backoffice", "bench/backoffice/run.py", "bench/backoffice/results.json", backoffice_rows,
          ["--loads", "5", "--warmup", "1", "--leads", "2000", "--jobs", "10000", "--stores", "3"]),
    Bench("chat", "bench/chat/run.py", "bench/chat/results.json", chat_rows,
          ["--chats", "20", "--tokens", "50", "--rounds", "1", "--open-rate", "5", "--open-seconds", "5"]),
    Bench("mcp", "bench/mcp/run.py", "bench/mcp/results.json", mcp_rows,
          ["--rounds", "1", "--duration", "2", "--warmup", "1", "--clients", "10"]),
    Bench("blog", "bench/blog/run.py", "bench/blog/results.json", blog_rows,
          ["--rounds", "1", "--duration", "2", "--warmup", "1", "--concurrency", "20", "--burst", "50",
           "--bursts", "1"]),
    Bench("privacy", "bench/privacy/run.py", "bench/privacy/results.json", privacy_rows,
          ["--rounds", "1", "--events", "500", "--jobs", "100", "--others", "2000", "--other-jobs", "10000"]),
]  # fmt: skip


def host():
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), "unknown CPU")  # fmt: skip
    return f"{cpu}, {len(os.sched_getaffinity(0))} cores"


def load_average():
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def number(value):
    if value is None:
        return "–"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def table(outcomes, *, started, ended, load_before, load_after, mode):
    """The Markdown table of every row of every benchmark, with the host and when and at what load."""
    lines = ["| Benchmark | Figure | Ours | Baseline | Ratio | Target | Met |", "| --- " * 7 + "|"]
    for bench, rows, error in outcomes:
        if error:
            lines.append(f"| {bench.name} | did not run: {error} | | | | | **no** |")
        for row in rows:
            met = "–" if row.met is None else "yes" if row.met else "**no**"
            ratio = "–" if row.ratio is None else f"{row.ratio:.2f}×"
            lines.append(f"| {bench.name} | {row.figure} | {number(row.value)} | {number(row.baseline)} | {ratio} |"
                         f" {row.target} | {met} |")  # fmt: skip
    if mode == "no-run":
        lines += ["", f"Made {started:%Y-%m-%d %H:%M} UTC from the results files already there, each taken at its"
                      f" own time (their `machine` block says when, on what and at what load); this host: {host()}."]
    else:
        note = " (--quick: smallest configurations, not the benchmarks' figures)" if mode == "quick" else ""
        lines += ["", f"Taken {started:%Y-%m-%d %H:%M}–{ended:%H:%M} UTC on {host()}{note}; load average"
                      f" (1, 5, 15 min) {load_before} before, {load_after} after."]  # fmt: skip
    return "\n".join(lines)


def write_readme(text):
    readme = README.read_text()
    head, _, rest = readme.partition(BEGIN)
    _, _, tail = rest.partition(END)
    README.write_text(f"{head}{BEGIN}\n{text}\n{END}{tail}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smallest configurations; results in bench/out/quick/")
    parser.add_argument("--only", default="", help="comma-separated names to run (default: all)")
    parser.add_argument("--no-run", action="store_true", help="only the table, from the results already there")
    args = parser.parse_args()
    only = {name.strip() for name in args.only.split(",") if name.strip()}
    if unknown := only - {bench.name for bench in BENCHMARKS}:
        parser.error(f"unknown benchmarks: {', '.join(sorted(unknown))}")
    chosen = [bench for bench in BENCHMARKS if not only or bench.name in only]

    started, load_before, outcomes = datetime.now(UTC), load_average(), []
    for bench in chosen:
        results = QUICK_DIR / f"{bench.name}.json" if args.quick else ROOT / bench.results
        error = ""
        if not args.no_run:
            results.parent.mkdir(parents=True, exist_ok=True)
            results.unlink(missing_ok=True)
            # Relative to the checkout (the working directory), so that results.json names no machine's path.
            command = bench.command(results.relative_to(ROOT)) + (bench.quick if args.quick else [])
            print(f"\n=== {bench.name}: {' '.join(command)}", flush=True)
            began = time.monotonic()
            status = subprocess.run(command, cwd=ROOT).returncode
            print(f"=== {bench.name}: exit status {status} after {time.monotonic() - began:.0f} s", flush=True)
            if status not in (0, 1):  # 1: ran, a target missed
                error = f"exit status {status}"
        rows = []
        if not error:
            try:
                rows = bench.rows(json.loads(results.read_text()))
            except FileNotFoundError:
                error = "it wrote no results (its output above says why)"
            except (OSError, ValueError, KeyError, TypeError) as exc:
                error = f"its results unread ({type(exc).__name__}: {exc})"
        outcomes.append((bench, rows, error))
    text = table(outcomes, started=started, ended=datetime.now(UTC), load_before=load_before,
                 load_after=load_average(), mode="no-run" if args.no_run else "quick" if args.quick else "full")
    print(f"\n{text}")
    if not args.quick and not args.no_run and not only:
        write_readme(text)
        print(f"\nwritten {README.relative_to(ROOT)}")
    if any(error for _, _, error in outcomes):
        return 2
    return 0 if all(row.met is not False for _, rows, _ in outcomes for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
