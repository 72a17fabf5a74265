"""Liveness and readiness.

/healthz answers while the process serves requests. /readyz checks what a
request needs (database, cache, broker) with django-health-check and adds
operational details, such as how many jobs are dead-lettered.
"""

import dataclasses

from asgiref.sync import sync_to_async
from django.http import HttpResponse, JsonResponse
from health_check.base import HealthCheck
from health_check.checks import Cache, Database
from health_check.exceptions import ServiceUnavailable
from health_check.views import HealthCheckView

from config.celery import app as celery_app
from jobs.selectors import jobs_dead_count


@dataclasses.dataclass
class Broker(HealthCheck):
    """The Celery broker accepts a connection (any transport: Redis, filesystem…)."""

    def run(self):
        try:
            with celery_app.connection_for_write() as connection:
                connection.ensure_connection(max_retries=1, timeout=2)
        except Exception as exc:
            raise ServiceUnavailable("broker unreachable") from exc


class ReadinessView(HealthCheckView):
    checks = (Database, Cache, Broker)

    async def get(self, request, *args, **kwargs):
        self.jobs_dead = await sync_to_async(jobs_dead_count)()
        return await super().get(request, *args, **kwargs)

    def render_to_response_json(self, status):
        body = {
            "status": "ok" if status == 200 else "unavailable",
            "checks": {type(r.check).__name__: "OK" if not r.error else str(r.error) for r in self.results},
            "details": {"jobs_dead": self.jobs_dead},
        }
        return JsonResponse(body, status=status)


def healthz(request):
    return HttpResponse("ok\n", content_type="text/plain")
