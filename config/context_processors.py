"""Template context every page shares."""

from django.conf import settings


def standins(request):
    """The stand-ins' inbox, when outside services are played by local stand-ins (`make run`): every page says so."""
    return {"STANDINS_URL": settings.STANDINS_URL}
