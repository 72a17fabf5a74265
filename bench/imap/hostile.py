"""Hostile lead emails through the parser: the slowest must parse in under 100 ms.

Each message of standins/hostile_emails.py is parsed --repeat times by
tracking.parsing (after one warm-up parse) and its median kept; an ordinary
lead notification is measured the same way as the reference. With --baseline
(default), the parser as it was before its inputs were bounded, read from git
at BASELINE_COMMIT, parses the same messages side by side in a child process
each, stopped after --baseline-timeout seconds. Writes
bench/imap/hostile_results.json; exits 0 when the target is met, 1 when not.
"""

import argparse
import json
import multiprocessing
import os
import platform
import statistics
import subprocess
import sys
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

from standins.hostile_emails import HOSTILE_MESSAGES  # noqa: E402
from standins.lead_emails import lead_message  # noqa: E402
from tracking.parsing import parse_lead_email  # noqa: E402

RESULTS = Path(__file__).with_name("hostile_results.json")
BASELINE_COMMIT = "6eb3a7c"  # the last parser without bounded inputs
TARGET_MS = 100.0


def median_ms(parse, raw: bytes, repeat: int) -> float:
    parse(raw)
    timings = []
    for _ in range(repeat):
        started = time.perf_counter()
        parse(raw)
        timings.append((time.perf_counter() - started) * 1000)
    return statistics.median(timings)


def baseline_parser():
    source = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{BASELINE_COMMIT}:tracking/parsing.py"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    module = types.ModuleType("baseline_parsing")
    exec(compile(source, "baseline_parsing.py", "exec"), module.__dict__)  # noqa: S102  (our own earlier code)
    return module.parse_lead_email


def _baseline_child(name: str, done) -> None:
    parse = baseline_parser()
    raw = HOSTILE_MESSAGES[name]() if name != "ordinary lead" else lead_message()
    started = time.perf_counter()
    parse(raw)
    done.put((time.perf_counter() - started) * 1000)


def baseline_ms(name: str, timeout: float) -> float | None:
    """One parse by the earlier parser, in a child; None when it did not finish within `timeout`."""
    context = multiprocessing.get_context("fork")
    done = context.Queue()
    child = context.Process(target=_baseline_child, args=(name, done))
    child.start()
    child.join(timeout)
    if child.is_alive():
        child.kill()
        child.join()
        return None
    return done.get(timeout=5)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=7, help="parses per message, median kept (default 7)")
    parser.add_argument("--no-baseline", dest="baseline", action="store_false", help="skip the earlier parser")
    parser.add_argument("--baseline-timeout", type=float, default=10.0, help="seconds per baseline parse")
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args()

    rows = []
    cases = {"ordinary lead": lead_message, **HOSTILE_MESSAGES}
    for name, make in cases.items():
        raw = make()
        ours = median_ms(parse_lead_email, raw, args.repeat)
        base = baseline_ms(name, args.baseline_timeout) if args.baseline else None
        rows.append({"message": name, "bytes": len(raw), "ours_ms": round(ours, 2),
                     "baseline_ms": None if base is None else round(base, 1),
                     "baseline_finished": base is not None or not args.baseline})  # fmt: skip
        shown = "—" if not args.baseline else (f"{base:.1f}" if base is not None else f"> {args.baseline_timeout:g} s")
        print(f"{name:36} {len(raw):>10,} B   ours {ours:8.2f} ms   baseline {shown}", flush=True)

    slowest = max((row for row in rows if row["message"] != "ordinary lead"), key=lambda row: row["ours_ms"])
    summary = {
        "slowest_hostile": slowest["message"],
        "slowest_hostile_ms": slowest["ours_ms"],
        "ordinary_lead_ms": rows[0]["ours_ms"],
        "target_ms": TARGET_MS,
        "target_met": slowest["ours_ms"] < TARGET_MS,
    }
    results = {
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "load": os.getloadavg()},
        "repeat": args.repeat,
        "baseline_commit": BASELINE_COMMIT if args.baseline else None,
        "rows": rows,
        "summary": summary,
    }
    args.results.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(summary, indent=2))
    sys.exit(0 if summary["target_met"] else 1)


if __name__ == "__main__":
    main()
