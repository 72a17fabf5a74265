"""Redaction benchmark: our redact() against Presidio's pattern recognizers and scrubadub, same corpus, same run.

    scripts/with-services .venv/bin/python bench/tracking/redaction/run.py [--seed 5] [--count 6000]

See bench/tracking/README.md for what is measured and the results. Exit status
0 when every target holds (per class: recall >= 0.99, precision >= 0.98, recall
at least both others'; overall recall above both; throughput >= 10x Presidio's),
1 when one does not.

Nothing here downloads: Presidio gets a blank spaCy English pipeline written to a
temporary folder (so it never asks spaCy's model hub for one), and tldextract,
which Presidio's email rule calls, is held to the suffix list it ships with.
"""

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from collections import Counter
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
# Run as a script, Python puts this folder first on the path; the project root is what we want.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(ROOT))
# crm.redaction reads one setting (the default phone region). The project's settings want a database URL,
# so this runs under scripts/with-services though it sends no query.
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

from bench.tracking.redaction.corpus import CLASSES, generate  # noqa: E402
from crm.redaction import find_pii, redact  # noqa: E402

RESULTS = ROOT / "bench" / "tracking" / "redaction" / "results.json"
RECALL_TARGET = 0.99
PRECISION_TARGET = 0.98
SPEEDUP_TARGET = 10.0

PRESIDIO_CLASSES = {
    "EMAIL_ADDRESS": "EMAIL",
    "IP_ADDRESS": "IP",
    "PHONE_NUMBER": "PHONE",
    "CREDIT_CARD": "CARD",
    "US_SSN": "SSN",
    "URL": "URL_CREDENTIALS",  # it masks whole URLs, credentials included
}
SCRUBADUB_CLASSES = {
    "email": "EMAIL",
    "phone": "PHONE",
    "credit_card": "CARD",
    "social_security_number": "SSN",
    "credential": "SECRET",
    "url": "URL_CREDENTIALS",
}


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=5, help="corpus seed (default 5)")
    parser.add_argument("--count", type=int, default=6000, help="corpus samples (default 6000)")
    parser.add_argument(
        "--results", type=Path, default=RESULTS, help=f"JSON output (default {RESULTS.relative_to(ROOT)})"
    )
    return parser.parse_args()


# --- the three tools: spans for scoring, and the full redaction for timing -------------------


class Ours:
    name = "ours"
    classes = set(CLASSES)

    def spans(self, text):
        return [(f.start, f.end, f.kind) for f in find_pii(text)]

    def redact(self, text):
        return redact(text)


class Presidio:
    name = "presidio"
    classes = set(PRESIDIO_CLASSES.values())

    def __init__(self):
        import spacy
        import tldextract.tldextract
        from presidio_analyzer import AnalyzerEngine, RecognizerRegistry
        from presidio_analyzer.nlp_engine import NerModelConfiguration, SpacyNlpEngine
        from presidio_anonymizer import AnonymizerEngine

        tldextract.tldextract.TLD_EXTRACTOR = tldextract.TLDExtract(suffix_list_urls=())
        with tempfile.TemporaryDirectory(prefix="spacy-blank-en-") as model:
            spacy.blank("en").to_disk(model)
            # A path that exists is loaded as is; a model name would be downloaded from spaCy's hub.
            nlp = SpacyNlpEngine(
                models=[{"lang_code": "en", "model_name": model}],
                ner_model_configuration=NerModelConfiguration(labels_to_ignore=["*"]),
            )
            nlp.load()
        registry = RecognizerRegistry(supported_languages=["en"])
        registry.load_predefined_recognizers(nlp_engine=nlp, languages=["en"])
        self.analyzer = AnalyzerEngine(nlp_engine=nlp, registry=registry, supported_languages=["en"])
        self.anonymizer = AnonymizerEngine()

    def _analyze(self, text):
        return self.analyzer.analyze(text, language="en", entities=list(PRESIDIO_CLASSES))

    def spans(self, text):
        return [(r.start, r.end, PRESIDIO_CLASSES[r.entity_type]) for r in self._analyze(text)]

    def redact(self, text):
        return self.anonymizer.anonymize(text, self._analyze(text)).text


class Scrubadub:
    name = "scrubadub"
    classes = set(SCRUBADUB_CLASSES.values())

    def __init__(self):
        import scrubadub

        self.scrubber = scrubadub.Scrubber()

    def spans(self, text):
        spans = []
        for filth in self.scrubber.iter_filth(text):
            # Overlapping finds come back merged; score their parts.
            for part in getattr(filth, "filths", None) or [filth]:
                if part.type in SCRUBADUB_CLASSES:
                    spans.append((part.beg, part.end, SCRUBADUB_CLASSES[part.type]))
        return spans

    def redact(self, text):
        return self.scrubber.clean(text)


# --- scoring ---------------------------------------------------------------------------------


def score(tool, corpus):
    """Per class: recall (entities with no letter or digit left outside a same-class span),
    precision (found spans that overlap an entity of their class)."""
    found = Counter()
    entities = Counter()
    true_spans = Counter()
    spans_total = Counter()
    for sample in corpus:
        predicted = tool.spans(sample.text)
        for start, end, kind in sample.entities:
            entities[kind] += 1
            covered = set()
            for p_start, p_end, p_kind in predicted:
                if p_kind == kind:
                    covered.update(range(max(start, p_start), min(end, p_end)))
            if all(i in covered for i in range(start, end) if sample.text[i].isalnum()):
                found[kind] += 1
        for p_start, p_end, p_kind in predicted:
            spans_total[p_kind] += 1
            if any(kind == p_kind and p_start < end and start < p_end for start, end, kind in sample.entities):
                true_spans[p_kind] += 1
    per_class = {}
    for kind in CLASSES:
        supported = kind in tool.classes
        per_class[kind] = {
            "entities": entities[kind],
            "found": found[kind],
            "recall": found[kind] / entities[kind] if entities[kind] else None,
            "spans": spans_total[kind],
            "precision": true_spans[kind] / spans_total[kind] if spans_total[kind] else None,
            "has_recognizer": supported,
        }
    total = sum(entities.values())
    return {"per_class": per_class, "recall": sum(found.values()) / total}


def throughput(tools, corpus, chunk=100):
    """Texts/s and MB/s of each tool's full redaction (detection and replacement).

    Timed in CPU seconds of this process, which other load on the machine barely moves,
    with the tools taking turns chunk by chunk so that what load there is falls on all.
    """
    texts = [sample.text for sample in corpus]
    for tool in tools:
        for text in texts[:50]:  # warm-up: metadata loads, regex caches
            tool.redact(text)
    cpu = dict.fromkeys((tool.name for tool in tools), 0.0)
    wall = dict(cpu)
    for start in range(0, len(texts), chunk):
        for tool in tools:
            wall_started, cpu_started = time.perf_counter(), time.process_time()
            for text in texts[start : start + chunk]:
                tool.redact(text)
            cpu[tool.name] += time.process_time() - cpu_started
            wall[tool.name] += time.perf_counter() - wall_started
    megabytes = sum(len(text.encode()) for text in texts) / 1e6
    return {
        name: {
            "cpu_seconds": round(cpu[name], 3),
            "wall_seconds": round(wall[name], 3),
            "texts_per_second": len(texts) / cpu[name],
            "mb_per_second": megabytes / cpu[name],
        }
        for name in cpu
    }


# --- report ----------------------------------------------------------------------------------


def verdicts(results):
    ours, others = results["ours"], [results["presidio"], results["scrubadub"]]
    checks = {}
    for kind in CLASSES:
        mine = ours["score"]["per_class"][kind]
        checks[f"{kind} recall >= {RECALL_TARGET}"] = mine["recall"] >= RECALL_TARGET
        checks[f"{kind} precision >= {PRECISION_TARGET}"] = (mine["precision"] or 0) >= PRECISION_TARGET
        checks[f"{kind} recall >= presidio and scrubadub"] = all(
            mine["recall"] >= (other["score"]["per_class"][kind]["recall"] or 0) for other in others
        )
    checks["overall recall above presidio and scrubadub"] = all(
        ours["score"]["recall"] > other["score"]["recall"] for other in others
    )
    speedup = ours["throughput"]["texts_per_second"] / results["presidio"]["throughput"]["texts_per_second"]
    checks[f"throughput >= {SPEEDUP_TARGET:.0f}x presidio"] = speedup >= SPEEDUP_TARGET
    return checks, speedup


def print_report(results, corpus, checks, speedup):
    names = list(results)
    print(f"\ncorpus: {len(corpus)} texts, {sum(len(s.entities) for s in corpus)} labeled entities\n")
    print(f"{'class':<17}{'n':>6}" + "".join(f"{name + ' R':>13}" for name in names) + f"{'ours P':>10}")
    for kind in CLASSES:
        row = results["ours"]["score"]["per_class"][kind]
        cells = []
        for name in names:
            cell = results[name]["score"]["per_class"][kind]
            cells.append(f"{cell['recall']:>13.3f}" if cell["has_recognizer"] else f"{'-':>13}")
        print(f"{kind:<17}{row['entities']:>6}" + "".join(cells) + f"{row['precision'] or 0:>10.3f}")
    print(f"{'all classes':<17}{'':>6}" + "".join(f"{results[n]['score']['recall']:>13.3f}" for n in names))
    print()
    for name in names:
        t = results[name]["throughput"]
        print(
            f"{name:<10} {t['texts_per_second']:>10.0f} texts/s {t['mb_per_second']:>8.3f} MB/s"
            f"  ({t['cpu_seconds']} s CPU, {t['wall_seconds']} s wall)"
        )
    print(f"\nspeed-up over presidio: {speedup:.1f}x\n")
    for check, passed in checks.items():
        print(f"  {'ok ' if passed else 'MISS'} {check}")


def main():
    args = parse_args()
    corpus = generate(args.seed, args.count)
    tools = (Ours(), Presidio(), Scrubadub())
    results = {}
    for tool in tools:
        print(f"{tool.name}: scoring...", flush=True)
        results[tool.name] = {"score": score(tool, corpus)}
    print("timing all three, in turns...", flush=True)
    for name, measured in throughput(tools, corpus).items():
        results[name]["throughput"] = measured
    checks, speedup = verdicts(results)
    print_report(results, corpus, checks, speedup)
    args.results.write_text(
        json.dumps(
            {
                "seed": args.seed,
                "count": args.count,
                "entities": sum(len(s.entities) for s in corpus),
                "tools": results,
                "speedup_over_presidio": speedup,
                "checks": checks,
                "machine": {"python": platform.python_version(), "platform": platform.platform()},
                "versions": {
                    package: version(package)
                    for package in ("phonenumbers", "presidio-analyzer", "presidio-anonymizer", "spacy", "scrubadub")
                },
            },
            indent=2,
        )
        + "\n"
    )
    print(f"\nresults: {args.results.relative_to(ROOT) if args.results.is_relative_to(ROOT) else args.results}")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
