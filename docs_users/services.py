"""Writes of the signed-in docs and MCP users beyond capture (docs_users.activity) and the sync
(docs_users.sync): session housekeeping and data-subject erasure."""

from importlib import import_module

from django.conf import settings

from docs_users.models import TrackedUser


def sessions_clear_expired() -> None:
    """What `manage.py clearsessions` does, for beat: the session engine deletes its expired sessions."""
    import_module(settings.SESSION_ENGINE).SessionStore.clear_expired()


# --- data-subject requests (privacy/) ------------------------------------------------------------


def subject_erase(*, user_ids) -> dict[str, int]:
    """Delete these tracked users, with everything captured about them (all on their rows). {model label: rows
    deleted}."""
    return TrackedUser.objects.filter(pk__in=user_ids).delete()[1]
