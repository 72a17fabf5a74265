"""Worker settings for `bench/imap/run.py --worker-settings bench.imap.worker_db_reuse`.

The shipped settings, plus CELERY_DB_REUSE_MAX: Celery's Django fixup then
keeps a worker process's database connection across tasks instead of closing
it (and, with OPTIONS["pool"], the whole pool) before and after every task.
bench/imap/README.md shows what that costs per email.
"""

from config.settings import *  # noqa: F403

CELERY_DB_REUSE_MAX = 1000
