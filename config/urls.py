from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from config import collectors
from config.health import ReadinessView, healthz

admin.site.site_header = "Lead back office"
admin.site.site_title = "Lead back office"

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("readyz", ReadinessView.as_view(), name="readyz"),
    path("metrics", collectors.metrics, name="metrics"),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("admin/", admin.site.urls),
    # First of the apps: /api/posts is the most requested route, and every request is resolved twice (foundation.limits)
    path("", include("blog.urls")),
    path("", include("docs_users.urls")),
    path("", include("leadgen.urls")),
    path("", include("prototypes.urls")),
    path("", include("chat.urls")),
    path("", include("sources.urls")),
]
