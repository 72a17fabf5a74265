class TransientError(Exception):
    """Worth retrying: timeouts, 429, 5xx, an open circuit. `retry_after` is in seconds."""

    def __init__(self, message="", *, retry_after=None):
        super().__init__(message)
        self.retry_after = retry_after


class PermanentError(Exception):
    """Retrying cannot help (4xx, bad data): the job is dead-lettered at once."""


class SkipJob(Exception):
    """The job has nothing to do, e.g. its integration is not configured. Recorded, not retried."""
