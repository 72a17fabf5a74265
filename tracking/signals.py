"""The cached store mapping follows every change to a Store."""

from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from stores.models import Store
from tracking.services import store_mapping_invalidate


@receiver([post_save, post_delete], sender=Store, dispatch_uid="tracking.store_mapping_invalidate")
def invalidate_store_mapping(sender, **kwargs):
    store_mapping_invalidate()
