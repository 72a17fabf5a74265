"""Competitor mentions in Kapa question text: whole-word, case-insensitive name rules."""

import re
from collections.abc import Iterable

import structlog

logger = structlog.get_logger(__name__)

# The product is Kafka-compatible: half the questions say "Kafka", so a Kafka rule only
# adds noise. Any configured name containing the word is refused.
_KAFKA = re.compile(r"(?<!\w)kafka(?!\w)", re.I)


def competitor_rules(names: Iterable[str]) -> dict[str, re.Pattern]:
    """One rule per configured name (KAPA_COMPETITORS), blank and Kafka names dropped.

    "Amazon MSK" matches across any whitespace; "Aiven" does not match inside "Aivens".
    """
    rules: dict[str, re.Pattern] = {}
    for raw_name in names:
        name = " ".join(raw_name.split())
        if not name or name.lower() in (known.lower() for known in rules):
            continue
        if _KAFKA.search(name):
            logger.warning("kapa_competitor_refused", name=name, reason="Kafka is never counted")
            continue
        words = r"\s+".join(re.escape(word) for word in name.split(" "))
        rules[name] = re.compile(rf"(?<!\w){words}(?!\w)", re.I)
    return rules


def count_mentions(questions: Iterable[str], rules: dict[str, re.Pattern]) -> dict[str, int]:
    """Per competitor, how many questions name it (a question counts once); unmentioned ones left out."""
    counts = dict.fromkeys(rules, 0)
    for question in questions:
        for name, rule in rules.items():
            if rule.search(question):
                counts[name] += 1
    return {name: count for name, count in counts.items() if count}
