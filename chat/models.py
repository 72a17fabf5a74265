from django.db import models


class ChatSession(models.Model):
    """A visitor's sales-chat conversation: where it came from and the lead it produced.

    The client IP is what `/api/leads/lookup` attributes a session's rate-limit
    bucket to when the agent does not say it.
    """

    session_id = models.CharField(max_length=128, unique=True)
    client_ip = models.GenericIPAddressField(null=True, blank=True)
    first_seen_at = models.DateTimeField(auto_now_add=True)
    last_seen_at = models.DateTimeField(auto_now=True, db_index=True)  # the retention clock
    lead = models.ForeignKey(
        "leadgen.Lead", null=True, blank=True, on_delete=models.SET_NULL, related_name="chat_sessions"
    )

    def __str__(self):
        return self.session_id


class ChatMessage(models.Model):
    class Role(models.TextChoices):
        USER = "user"
        ASSISTANT = "assistant"

    class State(models.TextChoices):
        COMPLETE = "complete"
        PARTIAL = "partial"  # the agent stopped mid-answer: what it said so far
        FAILED = "failed"  # the agent said nothing before it failed

    session = models.ForeignKey(ChatSession, on_delete=models.CASCADE, related_name="messages")
    role = models.CharField(max_length=16, choices=Role.choices)
    content = models.TextField(blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    state = models.CharField(max_length=16, choices=State.choices, default=State.COMPLETE)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["session", "created_at"])]

    def __str__(self):
        return f"{self.role}: {self.content[:60]}"
