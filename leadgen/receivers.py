"""The lead's side of its AI prototype (prototypes.signals): the preview on the lead, the rate-limit hold."""

from django.dispatch import receiver

import jobs
from leadgen import services
from prototypes.signals import prototype_checked, prototypes_finished

PROTOTYPE_SETTLE_KIND = "leadgen.prototype_settle"


@receiver(prototype_checked)
def keep_the_hold(sender, *, prototype, **kwargs):
    services.lead_prototype_renew(lead=prototype.lead)


@receiver(prototypes_finished)
def settle_the_prototypes(sender, *, prototypes, **kwargs):
    """In the prototypes' final transaction: the previews saved, each quota settled by a job of its own."""
    completed = [prototype for prototype in prototypes if prototype.state == "completed"]
    if completed:
        services.leads_preview_set(previews=[(prototype.lead, prototype.preview_url) for prototype in completed])
    jobs.enqueue_many([
        jobs.JobSpec(
            PROTOTYPE_SETTLE_KIND,
            {"lead_id": prototype.lead_id, "prototype_id": prototype.pk, "completed": prototype.state == "completed"},
            key=f"{PROTOTYPE_SETTLE_KIND}:{prototype.pk}:{prototype.events}",
        )
        for prototype in prototypes
    ])  # fmt: skip
