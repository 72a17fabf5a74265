"""The email-tracking fixtures (a real dovecot server, a mailbox on it, stores) for the hardening tests."""

from tests.tracking.conftest import dovecot, fresh_tracking_state, mailbox, make_store  # noqa: F401
