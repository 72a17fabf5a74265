"""The site's URLs and a view that fails with personal data in its message and its local variables."""

from django.urls import include, path
from django.views.decorators.csrf import csrf_exempt


@csrf_exempt
def fail(request):
    email = request.GET["email"]
    raise LookupError(f"no contact for {email}")


urlpatterns = [path("fail", fail), path("", include("config.urls"))]
