"""Names the job layer itself owns: its own job kinds and the Celery tasks that run jobs.

Run messages are published by task name (jobs/runtime.py), so the runtime and
jobs/tasks.py never import each other.
"""

PING_KIND = "jobs.ping"
DEAD_ALERT_KIND = "jobs.dead_alert"

RUN_TASK = "jobs.run"
RUN_MANY_TASK = "jobs.run_many"
SWEEP_TASK = "jobs.sweep"
RETENTION_KIND = "jobs.retention"
RETENTION_TASK = "jobs.retention_start"
