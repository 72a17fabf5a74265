"""Liveness and readiness.

/healthz answers while the process serves requests. /readyz checks what a
request needs (database, cache, broker) with django-health-check, and that
the dispatcher's sweep keeps running, and adds operational details such as how
many jobs are dead-lettered.

/readyz is public, so it is cheap and says little: the checks run at most once
per READYZ_CACHE_SECONDS per process (one broker connection then, not one per
call), and only a staff session or `Authorization: Bearer HEALTH_CHECK_TOKEN`
sees the checks and details; everyone else, loopback included, gets the status.
"""

import asyncio
import dataclasses
import time
from datetime import UTC, datetime

from asgiref.sync import sync_to_async
from django.conf import settings
from django.http import HttpResponse, JsonResponse
from health_check.base import HealthCheck
from health_check.checks import Cache, Database
from health_check.exceptions import ServiceUnavailable
from health_check.views import HealthCheckView

import jobs
from config.celery import app as celery_app
from docs_mcp.health import McpServer
from foundation.secrets import bearer_token, secret_matches

STARTED_AT = datetime.now(UTC)


@dataclasses.dataclass
class Broker(HealthCheck):
    """The Celery broker (Redis) accepts a connection."""

    def run(self):
        try:
            with celery_app.connection_for_write() as connection:
                connection.ensure_connection(max_retries=1, timeout=2)
        except Exception as exc:
            raise ServiceUnavailable("broker unreachable") from exc


@dataclasses.dataclass
class Sweep(HealthCheck):
    """The sweep (beat, every JOBS_SWEEP_SECONDS) ran within JOBS_SWEEP_LATE_SECONDS.

    Nothing else resends the run messages a dying process had not sent, so a
    disabled schedule or a stopped beat must show.
    """

    def run(self):
        last = jobs.last_sweep_at()
        since = (datetime.now(UTC) - (last or STARTED_AT)).total_seconds()
        if since > settings.JOBS_SWEEP_LATE_SECONDS:
            raise ServiceUnavailable(f"late: last ran {last.isoformat() if last else 'never'}")


class ReadinessView(HealthCheckView):
    checks = (Database, Cache, Broker, McpServer, Sweep)
    _cached: dict = {"at": None}  # per process: the last results and when they were taken

    async def get(self, request, *args, **kwargs):
        status, body = await self._readiness()
        if not await sync_to_async(self._may_see_details)(request):
            body = {"status": body["status"]}
        return JsonResponse(body, status=status)

    async def _readiness(self) -> tuple[int, dict]:
        cached = ReadinessView._cached
        if cached["at"] is None or time.monotonic() - cached["at"] >= settings.READYZ_CACHE_SECONDS:
            with self.get_executor() as executor:
                self.results = await asyncio.gather(*(check.get_result(executor) for check in self.get_checks()))
            status = 500 if any(result.error for result in self.results) else 200
            body = {
                "status": "ok" if status == 200 else "unavailable",
                "checks": {type(r.check).__name__: "OK" if not r.error else str(r.error) for r in self.results},
                "details": {
                    "jobs_dead": await sync_to_async(jobs.dead_count)(),
                    "last_sweep_at": (last := await sync_to_async(jobs.last_sweep_at)()) and last.isoformat(),
                },
            }
            ReadinessView._cached = {"at": time.monotonic(), "status": status, "body": body}
            cached = ReadinessView._cached
        return cached["status"], cached["body"]

    @staticmethod
    def _may_see_details(request) -> bool:
        if secret_matches(bearer_token(request), settings.HEALTH_CHECK_TOKEN):
            return True
        user = getattr(request, "user", None)
        return bool(user and user.is_active and user.is_staff)


def healthz(request):
    return HttpResponse("ok\n", content_type="text/plain")
