from django.apps import AppConfig


class FoundationConfig(AppConfig):
    name = "foundation"
    verbose_name = "Foundation"

    def ready(self):
        # Runs after every app's ready(): admin modules are all loaded by then (django.contrib.admin autodiscovers
        # in its own ready(), earlier in INSTALLED_APPS), so library actions can be fenced.
        from foundation import checks  # noqa: F401  (registers the production settings checks)
        from foundation.admin_actions import admin_actions_require_permissions, admin_exports_escape_formulae

        admin_actions_require_permissions()
        admin_exports_escape_formulae()
