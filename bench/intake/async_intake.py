"""Experiment `async_view`: POST /api/leads as an async Django view, to size what a thread-free wait buys.

Not the project's endpoint: a bench-only sketch of the recommended shape, with
the same steps the bench exercises (body size limit, DRF's scoped throttle,
LeadInputSerializer, the same prompt and strict answer parsing with the rules
as fallback, then the project's own `leadgen.services.lead_create`, jobs and
all). The difference is where the request waits: the classifier call (the
project's request body and answer parsing) is awaited on the event loop
through aiohttp (requirements-bench.txt), so a request holds a
thread (and a DB connection) only for the short database part, instead of a
thread for its whole life. Idempotency keys, the chat key, reCAPTCHA and the
prototype buckets are left out: the bench sends none of them and they are
off (unconfigured or not eligible) in its runs.
"""

import asyncio
import json
from types import SimpleNamespace

import aiohttp
from asgiref.sync import sync_to_async
from django.conf import settings
from django.http import JsonResponse
from django.utils.decorators import method_decorator
from django.views import View
from django.views.decorators.csrf import csrf_exempt
from rest_framework.throttling import ScopedRateThrottle

from config.api import error_body
from integrations import llm
from leadgen import services
from leadgen.models import Lead
from leadgen.rules import Classification, classify_by_rules
from leadgen.serializers import LeadCreatedSerializer, LeadInputSerializer

_sessions = {}  # one aiohttp session per event loop (daphne runs one; the test client makes one per request)


def _session():
    loop = asyncio.get_running_loop()
    if loop not in _sessions:
        for stale in [other for other in _sessions if other.is_closed()]:
            del _sessions[stale]
        _sessions[loop] = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=settings.LLM_TIMEOUT_SECONDS),
            headers={"Authorization": f"Bearer {settings.LLM_API_KEY}"},
        )
    return _sessions[loop]


async def classify(fields: dict) -> Classification:
    submission = {
        "email": fields["email"],
        "message": fields.get("message", ""),
        "company": fields.get("company", ""),
        "name": f"{fields.get('first_name', '')} {fields.get('last_name', '')}".strip(),
        "service_type": fields.get("service_type", ""),
    }
    url = settings.LLM_BASE_URL.rstrip("/") + "/chat/completions"
    try:
        async with _session().post(url, json=llm.classification_body(settings.LLM_MODEL, submission)) as response:
            completion = await response.json(content_type=None) if response.status == 200 else None
        answer, _problem = llm.parse_classification(llm.completion_content(completion))
    except (TimeoutError, aiohttp.ClientError, ValueError):
        answer = None
    if answer:
        return Classification(answer.category, answer.confidence, answer.reasoning, Lead.Classifier.LLM)
    rules = {k: submission[k] for k in ("email", "message", "company", "name")}
    return classify_by_rules(**rules)


@method_decorator(csrf_exempt, name="dispatch")
class AsyncLeadCreateView(View):
    throttle_view = SimpleNamespace(throttle_scope="leads")

    async def post(self, request):
        if int(request.META.get("CONTENT_LENGTH") or 0) > settings.LEADS_MAX_BODY_BYTES:
            return JsonResponse(error_body("too_large", "Request body is too large."), status=413)
        throttle = ScopedRateThrottle()
        if not await sync_to_async(throttle.allow_request)(request, self.throttle_view):
            return JsonResponse(error_body("throttled", "Request was throttled."), status=429)
        try:
            data = json.loads(request.body)
        except ValueError:
            return JsonResponse(error_body("parse_error", "Malformed JSON."), status=400)
        serializer = LeadInputSerializer(data=data)
        if not serializer.is_valid():
            return JsonResponse(error_body("invalid", "Some fields are invalid.", serializer.errors), status=400)
        fields = dict(serializer.validated_data)
        fields.pop("recaptchaToken", None)
        classification = await classify(fields)
        lead = await sync_to_async(services.lead_create)(
            fields=fields, client_ip=request.META.get("REMOTE_ADDR"), classification=classification
        )
        body = {"leadId": lead.pk, "previewUrl": lead.preview_url or None,
                "pipedrive": {"status": lead.pipedrive_state, "leadId": lead.pipedrive_lead_id or None}}  # fmt: skip
        return JsonResponse(LeadCreatedSerializer(body).data)
