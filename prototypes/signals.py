"""What the prototype flow tells the apps above it (leadgen owns the lead, its preview and its rate limit).

Sent inside the transaction of the change, so a receiver's writes and jobs
commit or roll back with it; prototypes never imports those apps.
"""

from django.dispatch import Signal

# A check found the prototype still being worked on. Arguments: prototype.
prototype_checked = Signal()
# Prototypes ended (completed, failed or cancelled), in one transaction. Arguments: prototypes (a list, each
# with state and preview_url set): a thousand generations can end within seconds (the progress stream's relays).
prototypes_finished = Signal()
