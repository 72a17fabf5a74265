"""The docs MCP server: tools over our documentation for agents, each call tracked per signed-in user."""

from django.conf import settings


def is_configured() -> bool:
    """On once the Auth0 tenant and the API audience are set (read here, light: the web process asks too)."""
    return bool(settings.AUTH0_DOMAIN and settings.MCP_AUDIENCE)
