from django.db import models
from django.utils import timezone


class Job(models.Model):
    """One durable side effect: the outbox row and, when it fails for good, the dead letter."""

    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        SKIPPED = "skipped"
        DEAD = "dead"

    kind = models.CharField(max_length=100)
    key = models.CharField(max_length=255, help_text="Idempotency key.")
    payload = models.JSONField(default=dict, blank=True)
    # The store whose data the job handles, for store scoping in the admin (stores.scoping); empty for a
    # job of no one store, which only staff who see every store see.
    store = models.ForeignKey(
        "stores.Store", null=True, blank=True, on_delete=models.SET_NULL, db_index=False, related_name="+"
    )
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    max_attempts = models.PositiveIntegerField(default=8)
    run_after = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True, help_text="Start of the current attempt.")
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    dispatched_at = models.DateTimeField(
        null=True, blank=True, help_text="When a run message was last sent to the workers."
    )
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        # Every index is written again by each of a job's three writes (no update is HOT:
        # status is indexed), so there are only the ones reads need (bench/jobs measured it).
        # The key's one unique index serves ON CONFLICT, equality and prefix lookups.
        # job_due_idx serves both sweeps: pending by run_after, running (few) by lease.
        constraints = [
            models.UniqueConstraint(fields=["key"], name="job_unique_key", opclasses=["varchar_pattern_ops"])
        ]
        # job_store_idx serves a store's staff their list, and costs nothing on jobs of no store.
        indexes = [
            models.Index(fields=["status", "run_after"], name="job_due_idx"),
            models.Index(
                fields=["store", "-created_at"], name="job_store_idx", condition=models.Q(store__isnull=False)
            ),
        ]
        ordering = ["-created_at"]

    def __str__(self):
        return f"{self.kind} [{self.key}]"


class JobAttempt(models.Model):
    class Outcome(models.TextChoices):
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        SKIPPED = "skipped"
        RETRY = "retry"
        FAILED = "failed"
        LOST = "lost", "Lost (worker died)"

    # No index of its own: the unique (job, number) index starts with the job.
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="attempt_log", db_index=False)
    number = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(max_length=10, choices=Outcome.choices, default=Outcome.RUNNING)
    error = models.TextField(blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["number"]
        constraints = [
            models.UniqueConstraint(fields=["job", "number"], name="job_attempt_unique_number")
        ]

    def __str__(self):
        return f"attempt {self.number}: {self.outcome}"


class JobStep(models.Model):
    """A side effect a job completed, recorded the moment it returned: a re-run of the job skips it.

    Keyed by the job's key, not its row, so it holds across replays; deleted with the job by retention.
    """

    job_key = models.CharField(max_length=255)
    step = models.CharField(max_length=100)
    done_at = models.DateTimeField(default=timezone.now)
    result = models.JSONField(default=dict, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["job_key", "step"], name="job_step_unique")]

    def __str__(self):
        return f"{self.job_key}: {self.step}"
