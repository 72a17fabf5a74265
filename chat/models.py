from django.db import models


class ChatSession(models.Model):
    """A sales-chat session and the visitor IP it came from (rate limits follow the IP)."""

    session_id = models.CharField(max_length=128, unique=True)
    client_ip = models.GenericIPAddressField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self):
        return self.session_id
