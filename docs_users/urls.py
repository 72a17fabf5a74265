from django.urls import path

from docs_users.api import DocsActivityView, McpEventsView, RetentionTriggerView, SyncTriggerView
from docs_users.docs_auth import docs_callback, docs_login, docs_logout

urlpatterns = [
    path("docs/login", docs_login, name="docs-login"),
    path("docs/callback", docs_callback, name="docs-callback"),
    path("docs/logout", docs_logout, name="docs-logout"),
    path("docs-activity", DocsActivityView.as_view(), name="docs-activity"),
    path("api/tracking/mcp-events", McpEventsView.as_view(), name="tracking-mcp-events"),
    path("internal/tracking/sync", SyncTriggerView.as_view(), name="tracking-sync-trigger"),
    path("internal/tracking/retention", RetentionTriggerView.as_view(), name="tracking-retention-trigger"),
]
