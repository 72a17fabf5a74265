"""Names shared by the reads and the writes of email lead tracking: job kinds, the breaker, the cache key.

Their home is here, not in tracking.services or tracking.selectors, so that neither module needs the other
for a name."""

POLL_KIND = "tracking.poll_mailbox"
LEAD_RETRY_KIND = "tracking.lead_retry"
LEAD_WRITE_BREAKER = "tracking.lead_write"
STORE_MAPPING_CACHE_KEY = "tracking:store-mapping"
# The cached mapping is also dropped on every Store change (tracking/signals.py): this only bounds a missed drop.
STORE_MAPPING_CACHE_SECONDS = 300
# A poll is retried on connection errors (a refused login or a missing folder dead-letters at once); a lead
# parked while its write failed is retried this many times.
POLL_MAX_ATTEMPTS = 3
LEAD_RETRY_MAX_ATTEMPTS = 3
