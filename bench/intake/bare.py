"""The baseline of the intake benchmark: validate with the same serializer, insert the same row, answer.

No throttle, no reCAPTCHA, no classification, no jobs, no idempotency: the
floor that `POST /api/leads` is compared with. Bench-only, never routed by
the project's own URLconf.
"""

from django.db import connection
from rest_framework.response import Response
from rest_framework.views import APIView

from leadgen.models import Lead
from leadgen.serializers import LeadCreatedSerializer, LeadInputSerializer

REASONING = "Asks for help with a software project."  # what the fake LLM answers, so the rows match


class BareLeadCreateView(APIView):
    throttle_classes = []

    def post(self, request):
        serializer = LeadInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        fields = dict(serializer.validated_data)
        fields.pop("recaptchaToken", None)
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
        body = {"leadId": lead.pk, "previewUrl": None, "pipedrive": {"status": lead.pipedrive_state, "leadId": None}}
        return Response(LeadCreatedSerializer(body).data)


class PoolStatsView(APIView):
    """This daphne process's psycopg pool counters since the last call (pop_stats), plus its current state."""

    throttle_classes = []

    def get(self, request):
        pool = connection.pool  # Django's process-wide pool for the default alias
        return Response({**pool.pop_stats(), **{k: v for k, v in pool.get_stats().items() if k.startswith("pool_")}})
