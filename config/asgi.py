import os

import django
from channels.routing import ProtocolTypeRouter, URLRouter

from config.handlers import SyncChainASGIHandler

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django.setup(set_prefix=False)  # as django.core.asgi.get_asgi_application does, with our handler below
django_asgi_app = SyncChainASGIHandler()

# WebSocket routes join here as the chat flow lands; HTTP (pages, API, SSE) is Django.
application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": URLRouter([]),
    }
)
