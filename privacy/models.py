"""The audit of data-subject requests: who asked for what, when, and how many rows of each table it touched.

It holds no personal data: the person is named only by the request's own id, never by email or phone.
"""

from django.db import models


class SubjectRequest(models.Model):
    class Kind(models.TextChoices):
        EXPORT = "export"
        ERASE = "erase"

    kind = models.CharField(max_length=8, choices=Kind.choices)
    actor = models.CharField(max_length=150, help_text="The staff user or the command's operator.")
    requested_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    rows = models.JSONField(default=dict, blank=True, help_text="Rows found (export) or erased (erase), per table.")

    class Meta:
        ordering = ["-requested_at"]

    def __str__(self):
        return f"{self.kind} by {self.actor} at {self.requested_at:%Y-%m-%d %H:%M}"
