"""/readyz of the web process: the MCP server's process answers (its session manager is running).

uvicorn serves only after the lifespan has started the session manager, so
an answer from its /healthz means the MCP server can take sessions. While
the MCP server is off (AUTH0_DOMAIN or MCP_AUDIENCE unset) there is nothing
to take, and the check passes.
"""

import dataclasses

from django.conf import settings
from health_check.base import HealthCheck
from health_check.exceptions import ServiceUnavailable

from docs_mcp import is_configured
from integrations.http import HttpClient
from jobs import PermanentError, TransientError


@dataclasses.dataclass
class McpServer(HealthCheck):
    def run(self):
        if not is_configured():
            return
        probe = HttpClient(settings.MCP_INTERNAL_URL, connect_timeout=1, read_timeout=2)
        try:
            probe.get("healthz")
        except (TransientError, PermanentError) as exc:
            raise ServiceUnavailable("MCP server unreachable") from exc
