from django.db import models
from django.utils import timezone


class Prototype(models.Model):
    """The one V0 generation of a prototype-eligible lead, and where it stands."""

    class State(models.TextChoices):
        QUEUED = "queued"
        GENERATING = "generating"
        AWAITING_PLAN = "awaiting_plan", "awaiting plan approval"
        INTERRUPTED = "interrupted"
        STALE = "stale"
        COMPLETED = "completed"
        FAILED = "failed"

    TERMINAL = (State.COMPLETED, State.FAILED)

    lead = models.OneToOneField("leadgen.Lead", on_delete=models.CASCADE, related_name="prototype")
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED, db_index=True)
    chat_id = models.CharField(max_length=100, blank=True, help_text="The V0 chat: one per lead, ever.")
    message_id = models.CharField(max_length=100, blank=True, help_text="The assistant message being generated.")
    title = models.CharField(max_length=200, blank=True)
    preview_url = models.URLField(max_length=500, blank=True)
    continue_attempts = models.PositiveSmallIntegerField(default=0)
    recovery_attempts = models.PositiveSmallIntegerField(default=0)
    checks = models.PositiveIntegerField(default=0, help_text="Checks scheduled so far (numbers their jobs).")
    events = models.PositiveIntegerField(default=0, help_text="Events logged so far (the last event's number).")
    started_at = models.DateTimeField(null=True, blank=True)
    generating_since = models.DateTimeField(
        null=True, blank=True, help_text="Start of the current generation or recovery: the stale clock."
    )
    state_changed_at = models.DateTimeField(default=timezone.now)
    last_checked_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return f"prototype of lead #{self.lead_id} ({self.state})"

    @property
    def is_terminal(self) -> bool:
        return self.state in self.TERMINAL


class PrototypeEvent(models.Model):
    """What the progress stream shows, in order: written here first, then sent to open streams."""

    class Kind(models.TextChoices):
        PROGRESS = "progress"
        COMPLETE = "complete"
        ERROR = "error"

    prototype = models.ForeignKey(Prototype, on_delete=models.CASCADE, related_name="event_log", db_index=False)
    number = models.PositiveIntegerField(help_text="1, 2, 3… per prototype: the SSE event id.")
    kind = models.CharField(max_length=10, choices=Kind.choices)
    data = models.JSONField(default=dict)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["number"]
        constraints = [models.UniqueConstraint(fields=["prototype", "number"], name="prototype_event_unique_number")]

    def __str__(self):
        return f"{self.kind} #{self.number}"
