"""The deterministic classifier: used when the LLM is unavailable, slow or answers nonsense.

Plain functions, no ORM. Conservative on purpose: a real lead wrongly marked as
spam is lost money, so only clear signals move a submission away from `lead`.
"""

import re
from dataclasses import dataclass

from disposable_email_domains import blocklist as DISPOSABLE_DOMAINS


@dataclass(frozen=True)
class Classification:
    category: str  # lead | spam | vendor
    confidence: float
    reasoning: str
    classified_by: str  # llm | rules


URL = re.compile(r"(?:https?://|www\.)\S+", re.IGNORECASE)
BBCODE_LINK = re.compile(r"\[url=|<a\s+href=", re.IGNORECASE)
SPAM_WORDS = re.compile(
    r"\b(?:viagra|cialis|casino|porn|crypto\s+giveaway|bitcoin\s+doubler|payday\s+loan|forex\s+signals)\b",
    re.IGNORECASE,
)
VENDOR_PHRASES = re.compile(
    r"\b(?:seo\s+(?:services|agency|package|audit)|backlinks?|guest\s+posts?|link\s+building"
    r"|rank\s+(?:on|at)\s+(?:the\s+)?(?:first|1st|top)\s+page|increase\s+your\s+(?:traffic|sales|ranking)"
    r"|lead\s+generation\s+services|we\s+are\s+a\s+leading|offshore\s+(?:development|team)"
    r"|outsourcing\s+partner|white[\s-]label|web\s+design\s+services|our\s+agency\s+(?:can|offers|provides)"
    r"|partnership\s+opportunity|app\s+development\s+company|hire\s+(?:our|dedicated)\s+developers)\b",
    re.IGNORECASE,
)
MAX_LINKS_FOR_A_LEAD = 2


def classify_by_rules(*, email: str, message: str, company: str = "", name: str = "") -> Classification:
    domain = email.rpartition("@")[2].lower()
    if domain in DISPOSABLE_DOMAINS:
        return Classification("spam", 0.9, "Disposable email domain.", "rules")
    links = len(URL.findall(message))
    if links > MAX_LINKS_FOR_A_LEAD or BBCODE_LINK.search(message) or URL.search(name) or URL.search(company):
        return Classification("spam", 0.85, f"Link spam ({links} links).", "rules")
    if SPAM_WORDS.search(message):
        return Classification("spam", 0.85, "Spam vocabulary.", "rules")
    if pitch := VENDOR_PHRASES.search(message):
        return Classification("vendor", 0.8, f"Vendor pitch phrase: {pitch.group(0).lower()!r}.", "rules")
    return Classification("lead", 0.6, "No spam or vendor signal.", "rules")
