"""Submission classification through an OpenAI-compatible chat-completions endpoint (a LiteLLM proxy).

One POST of OpenAI's chat-completions body; the answer is read as plain
JSON and validated strictly by `parse_classification`.

It runs in the request path and the caller has a rule-based fallback, so the
client is quick to give up: a short timeout, no retries, and every failure
(timeout, connection error, HTTP error, an answer that is not the JSON we
asked for) returns None instead of raising. Logs name the failure kind only,
never the submission or the model's answer.

Why urllib3 here, not the project's HttpClient (requests) or the openai SDK:
this call is on every intake request. The SDK cost about twice requests' CPU
per call (request transformation, response models); requests' own per-call
work (request preparation, cookie jar, hooks, the response object) cost more
than the HTTP exchange underneath it: 1.2 ms against 0.5 ms of CPU per call
for the same POST over urllib3, the library requests itself sends with
(bench/intake). Proxies from the environment and the CA bundle are taken as
requests would take them.
"""

import functools
import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

import certifi
import structlog
import urllib3
from django.conf import settings
from requests.utils import get_environ_proxies

from integrations.http import environment_ca_bundle
from integrations.llm.prompts import CLASSIFY_SUBMISSION_SYSTEM_PROMPT, SUBMISSION_END, SUBMISSION_START

logger = structlog.get_logger(__name__)

CATEGORIES = frozenset({"lead", "spam", "vendor"})
REASONING_MAX_CHARS = 1000
# Room for the small JSON answer; a longer one is cut off and then rejected as malformed.
MAX_ANSWER_TOKENS = 300
# Connections kept open to the proxy, shared by the request threads of a process (beyond it a
# connection is opened and dropped per call rather than waited for).
POOL_SIZE = 100


@dataclass(frozen=True)
class Classification:
    category: str  # "lead", "spam" or "vendor"
    confidence: float  # 0..1
    reasoning: str


class LlmClassifier:
    """Shared by all request threads of a process: urllib3's pool is thread-safe and keeps no cookies."""

    def __init__(self, *, base_url: str, api_key: str, model: str, timeout_seconds: float):
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        url = urlsplit(self.url)
        self.log = logger.bind(service="llm", method="POST", host=url.hostname, path=url.path)  # as HttpClient logs
        options = {
            "maxsize": POOL_SIZE,
            "retries": False,  # the caller falls back to its rules instead
            "timeout": urllib3.Timeout(connect=timeout_seconds, read=timeout_seconds),
            "headers": {
                "Authorization": f"Bearer {api_key}",
                "Content-Type": "application/json",
                "User-Agent": settings.HTTP_USER_AGENT,
            },
            "ca_certs": environment_ca_bundle() or certifi.where(),
        }
        proxy = get_environ_proxies(self.url).get(url.scheme)
        self.pool = urllib3.ProxyManager(proxy, **options) if proxy else urllib3.PoolManager(**options)

    def classify_submission(self, fields: Mapping[str, object]) -> Classification | None:
        """The model's verdict on one form submission, or None when there is no usable verdict."""
        body = json.dumps(classification_body(self.model, fields)).encode()
        started = time.monotonic()
        try:
            response = self.pool.request("POST", self.url, body=body)
        except urllib3.exceptions.TimeoutError:
            logger.warning("llm_classification_failed", reason="timeout", error="llm: timed out")
            return None
        except urllib3.exceptions.HTTPError as exc:  # connection refused or reset, a broken answer
            logger.warning("llm_classification_failed", reason="unavailable", error=type(exc).__name__)
            return None
        status = response.status
        self.log.info("http_request", status=status, duration_ms=int((time.monotonic() - started) * 1000))
        if status >= 400:
            reason = "unavailable" if status == 429 or status >= 500 else "http_error"
            logger.warning("llm_classification_failed", reason=reason, error=f"llm: HTTP {status}")
            return None
        try:
            completion = json.loads(response.data)
        except ValueError:  # a body that is not JSON
            logger.warning("llm_classification_failed", reason="malformed_answer", problem="not_a_chat_completion")
            return None
        classification, problem = parse_classification(completion_content(completion))
        if classification is None:
            logger.warning("llm_classification_failed", reason="malformed_answer", problem=problem)
        return classification


def classification_body(model: str, fields: Mapping[str, object]) -> dict:
    """The chat-completions request: our prompt, the submission as data, JSON mode, deterministic, short."""
    return {
        "model": model,
        "messages": [
            {"role": "system", "content": CLASSIFY_SUBMISSION_SYSTEM_PROMPT},
            {"role": "user", "content": submission_as_data(fields)},
        ],
        "response_format": {"type": "json_object"},
        "temperature": 0,
        "max_tokens": MAX_ANSWER_TOKENS,
    }


def submission_as_data(fields: Mapping[str, object]) -> str:
    """The submission as a JSON object between markers the visitor cannot forge.

    JSON escaping keeps quotes and newlines inside their strings; escaping
    `<` and `>` as well means no value can spell the closing marker.
    """
    encoded = json.dumps(fields, ensure_ascii=False, default=str, sort_keys=True)
    encoded = encoded.replace("<", "\\u003c").replace(">", "\\u003e")
    return f"{SUBMISSION_START}\n{encoded}\n{SUBMISSION_END}"


def parse_classification(content: object) -> tuple[Classification | None, str]:
    """Strictly validate the model's answer; returns the classification or None with the reason."""
    if not isinstance(content, str) or not content:
        return None, "no_answer"
    try:
        answer = json.loads(content)
    except ValueError:
        return None, "not_json"
    if not isinstance(answer, dict):
        return None, "not_an_object"
    if set(answer) != {"category", "confidence", "reasoning"}:
        return None, "wrong_keys"
    category, confidence, reasoning = answer["category"], answer["confidence"], answer["reasoning"]
    if not isinstance(category, str) or category not in CATEGORIES:
        return None, "unknown_category"
    if isinstance(confidence, bool) or not isinstance(confidence, int | float) or not math.isfinite(confidence):
        return None, "confidence_not_a_number"
    if not 0 <= confidence <= 1:
        return None, "confidence_out_of_range"
    if not isinstance(reasoning, str) or not reasoning.strip():
        return None, "reasoning_missing"
    return Classification(category, float(confidence), reasoning.strip()[:REASONING_MAX_CHARS]), ""


def completion_content(completion: object) -> object:
    """The first message's content of a chat.completion; None when the JSON has another shape
    (a misbehaving proxy can hand back anything)."""
    try:
        return completion["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        return None


def client_from_settings() -> LlmClassifier | None:
    """None unless LLM_BASE_URL, LLM_API_KEY and LLM_MODEL are all set: the caller then uses its rules."""
    if not (settings.LLM_BASE_URL and settings.LLM_API_KEY and settings.LLM_MODEL):
        return None
    return _shared_classifier(
        settings.LLM_BASE_URL, settings.LLM_API_KEY, settings.LLM_MODEL, settings.LLM_TIMEOUT_SECONDS
    )


@functools.lru_cache(maxsize=4)
def _shared_classifier(base_url: str, api_key: str, model: str, timeout_seconds: float) -> LlmClassifier:
    # One per configuration, shared by all request threads: its pool keeps connections to the proxy open.
    return LlmClassifier(base_url=base_url, api_key=api_key, model=model, timeout_seconds=timeout_seconds)
