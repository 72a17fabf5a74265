from celery import shared_task

from leadgen.idempotency import idempotency_purge_expired


@shared_task(name="leadgen.purge_idempotency_keys")
def purge_idempotency_keys():
    return idempotency_purge_expired()
