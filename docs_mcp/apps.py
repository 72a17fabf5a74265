from django.apps import AppConfig


class DocsMcpConfig(AppConfig):
    name = "docs_mcp"
    verbose_name = "Docs MCP server"
