from django.apps import AppConfig


class DocsUsersConfig(AppConfig):
    name = "docs_users"
    verbose_name = "Docs and MCP users"

    def ready(self):
        # The handler module registers the sync, delivery and retention job kinds on import.
        from docs_users import handlers  # noqa: F401
