"""The baselines of the intake benchmark, bench-only, never routed by the project's own URLconf.

`BareLeadCreateView`: validate with the same serializer, insert the same row, answer. No throttle, no
reCAPTCHA, no classification, no jobs, no idempotency: the floor that target 1 compares `POST /api/leads` with.

`BareDurableLeadCreateView`: what any intake keeping the same promises must do, written the plain way with stock
Django, DRF, requests and Celery: validate, ask the classifier (the lead's status comes from it), insert the lead
and its jobs (`jobs_job`, as many as intake writes) in one transaction, then publish one Celery run message after
commit. No throttle and no idempotency key: those are promises of intake's beyond these, not counted here.
"""

import json
from datetime import timedelta

import requests
from celery import current_app
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone
from requests.adapters import HTTPAdapter
from rest_framework.response import Response
from rest_framework.views import APIView

from integrations.llm.prompts import CLASSIFY_SUBMISSION_SYSTEM_PROMPT
from jobs.kinds import RUN_MANY_TASK
from jobs.models import Job
from leadgen.models import Lead
from leadgen.serializers import LeadCreatedSerializer, LeadInputSerializer

REASONING = "Asks for help with a software project."  # what the fake LLM answers, so the rows match


def valid_fields(request) -> dict:
    """The lead's fields, validated by the same serializer as intake's (its 400s included)."""
    serializer = LeadInputSerializer(data=request.data)
    serializer.is_valid(raise_exception=True)
    fields = dict(serializer.validated_data)
    fields.pop("recaptchaToken", None)
    return fields


def created(lead: Lead) -> Response:
    """Intake's answer for a new lead."""
    body = {"leadId": lead.pk, "previewUrl": None, "pipedrive": {"status": lead.pipedrive_state, "leadId": None}}
    return Response(LeadCreatedSerializer(body).data)


class BareLeadCreateView(APIView):
    throttle_classes = []

    def post(self, request):
        fields = valid_fields(request)
        lead = Lead.objects.create(
            channel=Lead.Channel.WEB_FORM,
            client_ip=request.META.get("REMOTE_ADDR"),
            status=Lead.Status.LEAD,
            category=Lead.Status.LEAD,
            confidence=0.9,
            reasoning=REASONING,
            classified_by=Lead.Classifier.LLM,
            **fields,
        )
        return created(lead)


# requests, the sync client a plain Django view reaches for (a project dependency already): one Session per
# process keeps the connections to the classifier open, its pool as large as intake's (100: every request thread).
classifier_http = requests.Session()
classifier_http.mount("http://", HTTPAdapter(pool_connections=1, pool_maxsize=100))


def classify(fields: dict) -> dict:
    """The classifier's verdict, `{"category", "confidence", "reasoning"}`, from the same stand-in as intake's."""
    body = {
        "model": settings.LLM_MODEL,
        "messages": [
            {"role": "system", "content": CLASSIFY_SUBMISSION_SYSTEM_PROMPT},
            {"role": "user", "content": json.dumps(fields, default=str, sort_keys=True)},
        ],
        "response_format": {"type": "json_object"},
        "temperature": 0,
        "max_tokens": 300,
    }
    response = classifier_http.post(f"{settings.LLM_BASE_URL}/chat/completions", json=body,
                                    headers={"Authorization": f"Bearer {settings.LLM_API_KEY}"},
                                    timeout=settings.LLM_TIMEOUT_SECONDS)  # fmt: skip
    response.raise_for_status()
    return json.loads(response.json()["choices"][0]["message"]["content"])


def publish(job_ids: list[int]) -> None:
    """After commit: one run message naming the due jobs, as a stock Celery outbox sends it."""
    current_app.send_task(RUN_MANY_TASK, args=[job_ids])


class BareDurableLeadCreateView(APIView):
    throttle_classes = []

    def post(self, request):
        fields = valid_fields(request)
        name = f"{fields.get('first_name', '')} {fields.get('last_name', '')}".strip()
        verdict = classify(
            {
                "email": fields["email"],
                "message": fields.get("message", ""),
                "name": name,
                "company": fields.get("company", ""),
                "service_type": fields.get("service_type", ""),
            }
        )
        now = timezone.now()
        # lead_fan_out's jobs for a web-form lead: the confirmation waits, the others are due now.
        kinds = ["leadgen.lead_alert", "leadgen.pipedrive_sync", "leadgen.confirmation_email"]
        if settings.LEAD_IDENTITY_ENABLED:
            kinds.insert(1, "leadgen.lead_arrived")
        confirm_at = now + timedelta(seconds=settings.CONFIRMATION_EMAIL_DELAY)
        with transaction.atomic():
            lead = Lead.objects.create(
                channel=Lead.Channel.WEB_FORM,
                client_ip=request.META.get("REMOTE_ADDR"),
                status=verdict["category"],
                category=verdict["category"],
                confidence=verdict["confidence"],
                reasoning=verdict["reasoning"],
                classified_by=Lead.Classifier.LLM,
                pipedrive_state=Lead.PipedriveState.PENDING,
                **fields,
            )
            jobs = Job.objects.bulk_create([
                Job(kind=kind, key=lead.job_key(kind), payload={"lead_id": lead.pk}, created_at=now,
                    run_after=confirm_at if kind.endswith("confirmation_email") else now,
                    dispatched_at=None if kind.endswith("confirmation_email") else now)
                for kind in kinds
            ])  # fmt: skip
            due = [job.pk for job in jobs if job.dispatched_at]
            transaction.on_commit(lambda: publish(due))
        return created(lead)


class PoolStatsView(APIView):
    """This daphne process's psycopg pool counters since the last call (pop_stats), plus its current state."""

    throttle_classes = []

    def get(self, request):
        pool = connection.pool  # Django's process-wide pool for the default alias
        return Response({**pool.pop_stats(), **{k: v for k, v in pool.get_stats().items() if k.startswith("pool_")}})
