"""Submission classification through an OpenAI-compatible chat-completions endpoint (a LiteLLM proxy).

One POST of OpenAI's chat-completions body through the project's HttpClient;
the answer is read as plain JSON and validated strictly by `parse_classification`.

It runs in the request path and the caller has a rule-based fallback, so the
client is quick to give up: a short timeout (LLM_TIMEOUT_SECONDS), no retries,
and every failure (timeout, connection error, HTTP error, an answer that is not
the JSON we asked for) returns None instead of raising. Logs name the failure
kind only, never the submission or the model's answer.

Not the openai SDK: this call is on every intake request, and the SDK costs
about twice the CPU per call of a plain POST (request transformation, response
models), bench/intake.
"""

import functools
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass

import structlog
from django.conf import settings

from integrations.http import HttpClient, HttpTimeoutError
from integrations.llm.prompts import CLASSIFY_SUBMISSION_SYSTEM_PROMPT, SUBMISSION_END, SUBMISSION_START
from jobs import PermanentError, TransientError

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


class LlmClassifier(HttpClient):
    """Shared by all request threads of a process (the pool is thread-safe and keeps no cookies)."""

    service = "llm"
    # Every request thread of a process may be waiting on the proxy at once.
    pool_size = 100

    def __init__(self, *, base_url: str, api_key: str, model: str, timeout_seconds: float):
        super().__init__(base_url, connect_timeout=timeout_seconds, read_timeout=timeout_seconds)
        self.headers["Authorization"] = f"Bearer {api_key}"
        self.model = model

    def classify_submission(self, fields: Mapping[str, object]) -> Classification | None:
        """The model's verdict on one form submission, or None when there is no usable verdict. Never raises."""
        try:
            completion = self.post("chat/completions", json=classification_body(self.model, fields)).json()
        except HttpTimeoutError as exc:
            return _failed("timeout", error=str(exc))
        except TransientError as exc:  # connection refused or reset, 429, 5xx
            return _failed("unavailable", error=str(exc))
        except PermanentError as exc:  # another 4xx: our key, model or body was refused
            return _failed("http_error", error=str(exc))
        except ValueError:  # a body that is not JSON
            return _failed("malformed_answer", problem="not_a_chat_completion")
        classification, problem = parse_classification(completion_content(completion))
        if classification is None:
            return _failed("malformed_answer", problem=problem)
        return classification


def _failed(reason: str, **details) -> None:
    logger.warning("llm_classification_failed", reason=reason, **details)
    return None


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
