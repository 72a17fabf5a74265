"""Bench-only experiments: candidate project changes, tried without touching the project's code.

Switched on by `BENCH_EXPERIMENTS=name[,name...]` in the environment of the
processes that serve the bench (run.py passes `--experiments` through). They
exist to measure what a change to the project would buy; the benchmark's own
figures are taken with none of them.

- `async_request_id`: config.middleware.RequestIdHeaderMiddleware made
  sync-and-async capable. The project's version is sync-only, which makes
  Django's ASGI handler bounce every request through an extra
  async_to_sync/sync_to_async pair (two thread hand-offs).
- `bulk_jobs`: leadgen.services.lead_create writes the lead with
  `pipedrive_state=pending` and its three jobs in one multi-row INSERT (the keys
  are per new lead, so they cannot exist yet), instead of three
  `get_or_create` (SELECT + SAVEPOINT + INSERT + RELEASE each) and an UPDATE:
  4 statements instead of 16.
- `one_producer`: jobs.services._send_run_messages publishes a transaction's
  run messages through one acquired Celery producer instead of acquiring one
  (and building a Redis client) per message.
- `shared_redis_pool`: the cache's Redis connection pool shared by all threads.
  Django keeps one cache object per thread, and RedisCacheClient one
  ConnectionPool per cache object; under ASGI every request runs in a new
  thread, so every request that touches the cache (DRF's throttle does) opens
  a new Redis connection. The OPTIONS `pool_class` below hands every thread
  the same pool per URL.
- `async_view`: POST /api/leads served by bench/intake/async_intake.py, an async
  view that awaits the classifier on the event loop (openai.AsyncOpenAI) and
  runs only the project's lead_create (DB + jobs) in a thread.
- `raw_llm`: integrations.llm.LlmClassifier.classify_submission posts the same
  chat-completions body with a plain shared httpx2 client and parses the answer
  with the same parse_classification, skipping the openai SDK's request
  transformation and response models (to size the SDK's share of the CPU).
"""

import os
import threading
from datetime import timedelta

import redis
from asgiref.sync import iscoroutinefunction, markcoroutinefunction

KNOWN = ("async_request_id", "async_view", "bulk_jobs", "one_producer", "raw_llm", "shared_redis_pool")
ENABLED = tuple(x.strip() for x in os.environ.get("BENCH_EXPERIMENTS", "").split(",") if x.strip())
unknown = set(ENABLED) - set(KNOWN)
if unknown:
    raise RuntimeError(f"unknown BENCH_EXPERIMENTS {sorted(unknown)}; known: {KNOWN}")


class RequestIdHeaderMiddleware:
    """config.middleware.RequestIdHeaderMiddleware, sync and async capable."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)

    def __call__(self, request):
        if iscoroutinefunction(self):
            return self.__acall__(request)
        return self._tag(self.get_response(request))

    async def __acall__(self, request):
        return self._tag(await self.get_response(request))

    @staticmethod
    def _tag(response):
        import structlog

        request_id = structlog.contextvars.get_contextvars().get("request_id")
        if request_id:
            response["X-Request-ID"] = request_id
        return response


def middleware(project_middleware):
    if "async_request_id" not in ENABLED:
        return project_middleware
    ours = "bench.intake.experiments.RequestIdHeaderMiddleware"
    return [ours if m == "config.middleware.RequestIdHeaderMiddleware" else m for m in project_middleware]


class SharedConnectionPool(redis.ConnectionPool):
    """`from_url` returns one pool per (URL, options) for the whole process (redis-py pools are thread-safe)."""

    _shared = {}
    _lock = threading.Lock()

    @classmethod
    def from_url(cls, url, **kwargs):
        key = (url, tuple(sorted((k, repr(v)) for k, v in kwargs.items())))
        with cls._lock:
            if key not in cls._shared:
                cls._shared[key] = super().from_url(url, **kwargs)
            return cls._shared[key]


def caches(project_caches):
    if "shared_redis_pool" not in ENABLED or "Redis" not in project_caches["default"]["BACKEND"]:
        return project_caches
    default = dict(project_caches["default"])
    default["OPTIONS"] = {**default.get("OPTIONS", {}), "pool_class": "bench.intake.experiments.SharedConnectionPool"}
    return {**project_caches, "default": default}


def urlpatterns():
    """Routes that take precedence over the project's (bench/intake/urls.py puts them first)."""
    if "async_view" not in ENABLED:
        return []
    from django.urls import path

    from bench.intake.async_intake import AsyncLeadCreateView

    return [path("api/leads", AsyncLeadCreateView.as_view(), name="bench-async-leads")]


def apply():
    """Patch the project's functions for the enabled experiments (called once the apps are loaded)."""
    if "bulk_jobs" in ENABLED:
        _apply_bulk_jobs()
    if "one_producer" in ENABLED:
        _apply_one_producer()
    if "raw_llm" in ENABLED:
        _apply_raw_llm()


def _apply_bulk_jobs():
    from django.conf import settings
    from django.db import transaction
    from django.utils import timezone

    from jobs import services as job_services
    from jobs.models import Job
    from leadgen import services
    from leadgen.models import Lead

    original_fan_out = services.lead_fan_out

    @transaction.atomic
    def lead_create(*, fields, client_ip, classification):
        status = services.status_for(classification.category)
        lead = Lead.objects.create(
            channel=Lead.Channel.WEB_FORM,
            client_ip=client_ip,
            status=status,
            category=classification.category,
            confidence=classification.confidence,
            reasoning=classification.reasoning,
            classified_by=classification.classified_by,
            pipedrive_state=Lead.PipedriveState.PENDING if status == Lead.Status.LEAD else Lead.PipedriveState.NOT_SENT,
            **fields,
        )
        if status != Lead.Status.LEAD:
            original_fan_out(lead=lead)
            return lead
        now = timezone.now()
        later = lead.created_at + timedelta(seconds=settings.CONFIRMATION_EMAIL_DELAY)
        specs = [("leadgen.lead_alert", now), ("leadgen.pipedrive_sync", now), ("leadgen.confirmation_email", later)]
        rows = Job.objects.bulk_create([
            Job(kind=kind, key=f"{kind}:{lead.pk}", payload={"lead_id": lead.pk}, run_after=run_after,
                max_attempts=settings.JOBS_DEFAULT_MAX_ATTEMPTS, dispatched_at=now if run_after <= now else None,
                created_at=now)
            for kind, run_after in specs
        ])  # fmt: skip
        due = [job.pk for job in rows if job.run_after <= now]
        transaction.on_commit(lambda: job_services._send_run_messages(due))
        return lead

    services.lead_create = lead_create


def _apply_one_producer():
    import structlog

    from jobs import services as job_services

    logger = structlog.get_logger("bench.intake.experiments")

    def _send_run_messages(job_ids):
        from jobs.tasks import run_job

        try:
            with run_job.app.producer_or_acquire() as producer:
                for job_id in job_ids:
                    run_job.apply_async((job_id,), producer=producer)
        except Exception as exc:  # broker down: the sweep sends them again later
            logger.warning("job_dispatch_failed", job_ids=job_ids, error=type(exc).__name__)

    job_services._send_run_messages = _send_run_messages


def _apply_raw_llm():
    import httpx2

    from integrations import llm
    from integrations.llm.prompts import CLASSIFY_SUBMISSION_SYSTEM_PROMPT

    def classify_submission(self, fields):
        http = getattr(self, "_bench_http", None)
        if http is None:  # one per shared classifier; a race only builds a spare
            http = self._bench_http = httpx2.Client(
                base_url=str(self.client.base_url),
                timeout=self.client.timeout,
                headers={"Authorization": f"Bearer {self.client.api_key}"},
            )
        body = {
            "model": self.model,
            "messages": [
                {"role": "system", "content": CLASSIFY_SUBMISSION_SYSTEM_PROMPT},
                {"role": "user", "content": llm.submission_as_data(fields)},
            ],
            "response_format": {"type": "json_object"},
            "temperature": 0,
            "max_tokens": llm.MAX_ANSWER_TOKENS,
        }
        try:
            response = http.post("chat/completions", json=body)
            response.raise_for_status()
            content = response.json()["choices"][0]["message"]["content"]
        except (httpx2.HTTPError, ValueError, KeyError, IndexError, TypeError):
            return None
        classification, _problem = llm.parse_classification(content)
        return classification

    llm.LlmClassifier.classify_submission = classify_submission
