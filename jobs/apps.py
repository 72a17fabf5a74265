from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = "Operations: jobs"

    def ready(self):
        # Handler modules register their kinds on import; admin modules are all loaded by now
        # (django.contrib.admin is earlier in INSTALLED_APPS), so library actions can be fenced.
        from config import checks  # noqa: F401  (registers the production settings checks)
        from config.admin_actions import admin_actions_require_permissions, admin_exports_escape_formulae
        from jobs import handlers  # noqa: F401

        admin_actions_require_permissions()
        admin_exports_escape_formulae()
