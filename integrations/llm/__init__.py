"""Submission classification through an OpenAI-compatible chat-completions endpoint (a LiteLLM proxy).

It runs in the request path and the caller has a rule-based fallback, so the
client is quick to give up: a short timeout, no SDK retries, and every
failure (timeout, connection error, HTTP error, an answer that is not the
JSON we asked for) returns None instead of raising. Logs name the failure
kind only, never the submission or the model's answer.
"""

import functools
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass

import openai
import structlog
from django.conf import settings

from integrations.llm.prompts import CLASSIFY_SUBMISSION_SYSTEM_PROMPT, SUBMISSION_END, SUBMISSION_START

logger = structlog.get_logger(__name__)

CATEGORIES = frozenset({"lead", "spam", "vendor"})
REASONING_MAX_CHARS = 1000
# Room for the small JSON answer; a longer one is cut off and then rejected as malformed.
MAX_ANSWER_TOKENS = 300


@dataclass(frozen=True)
class Classification:
    category: str  # "lead", "spam" or "vendor"
    confidence: float  # 0..1
    reasoning: str


class LlmClassifier:
    def __init__(self, *, base_url: str, api_key: str, model: str, timeout_seconds: float):
        self.model = model
        self.client = openai.OpenAI(base_url=base_url, api_key=api_key, timeout=timeout_seconds, max_retries=0)

    def classify_submission(self, fields: Mapping[str, object]) -> Classification | None:
        """The model's verdict on one form submission, or None when there is no usable verdict."""
        try:
            completion = self.client.chat.completions.create(
                model=self.model,
                messages=[
                    {"role": "system", "content": CLASSIFY_SUBMISSION_SYSTEM_PROMPT},
                    {"role": "user", "content": submission_as_data(fields)},
                ],
                response_format={"type": "json_object"},
                temperature=0,
                max_tokens=MAX_ANSWER_TOKENS,
            )
        except openai.APITimeoutError:
            logger.warning("llm_classification_failed", reason="timeout")
            return None
        except openai.APIStatusError as exc:
            logger.warning("llm_classification_failed", reason="http_error", status=exc.status_code)
            return None
        except openai.OpenAIError as exc:
            logger.warning("llm_classification_failed", reason=type(exc).__name__)
            return None
        classification, problem = parse_classification(_answer_text(completion))
        if classification is None:
            logger.warning("llm_classification_failed", reason="malformed_answer", problem=problem)
        return classification


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


def _answer_text(completion) -> object:
    # The SDK does not validate response bodies: a misbehaving proxy can hand back any shape.
    try:
        return completion.choices[0].message.content
    except (AttributeError, IndexError, TypeError):
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
    # Building the SDK client costs ~60 ms (its TLS context), and its pool keeps connections to the
    # proxy open: one per configuration, shared by all request threads (the SDK client is thread-safe).
    return LlmClassifier(base_url=base_url, api_key=api_key, model=model, timeout_seconds=timeout_seconds)
