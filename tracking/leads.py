"""The upsert of leads captured from notification emails: the poller (tracking.services) parses, this writes.

Email leads are Lead rows of the email channel; they are written through tracking's own proxy of Lead,
EmailLead, the one model of leadgen's that tracking reaches. Only email leads carry a dedup key, so the
proxy's manager (the email channel only) sees every row a key can match."""

from django.db import connection, transaction

from foundation.db import insert_many_on_conflict, insert_on_conflict
from tracking.models import EmailLead

# Refreshed on a second sighting of the same email lead; everything else stays as first captured.
EMAIL_LEAD_REFRESHED = ("lead_type", "store", "franchise", "account_id", "synced_at", "updated_at")


def email_lead_upsert(*, dedup_key: str, fields: dict, reparse_key: str | None = None) -> tuple[EmailLead, bool]:
    """Write the lead an email describes, on its dedup key; returns (lead, complete). Runs in the caller's
    transaction, so the caller can emit its events atomically with the write.

    `fields` are Lead field values (texts are cut to their column: an email may carry any length of
    text, and the row keeps what fits rather than failing), with `parse_error` empty when the email
    was understood. Reprocessing the same message any number of times leaves one lead:
    - a new key inserts;
    - a lead kept earlier as a failed parse, now understood, is overwritten with everything;
    - otherwise (a second sighting) the lead type and the store are refreshed. The store is
      forward-only: a known store is never replaced, by null or by another store, because contacts
      and tasks downstream are keyed on it; franchise and account follow it only while it is the same.
    `reparse_key` names where a failed parse of this same message was kept (its key had no phone):
    when no lead has `dedup_key` yet, that failed lead becomes this one.
    """
    fields = _email_lead_fields(fields)
    with transaction.atomic():
        lead = _email_lead_failed(reparse_key, dedup_key) if reparse_key and not fields["parse_error"] else None
        if lead is not None:
            _lead_overwrite(lead, {"dedup_key": dedup_key, **fields})
        else:
            lead = EmailLead(dedup_key=dedup_key, **fields)
            inserted = insert_on_conflict(lead, on_conflict="ON CONFLICT (dedup_key) DO NOTHING", returning="id")
            if inserted:
                lead.pk, lead._state.adding = inserted[0], False
            else:
                lead = EmailLead.objects.select_for_update().get(dedup_key=dedup_key)
                if lead.parse_state == EmailLead.ParseState.FAILED and not fields["parse_error"]:
                    _lead_overwrite(lead, fields)
                else:
                    _email_lead_refresh(lead, fields)
    return lead, lead.parse_state == EmailLead.ParseState.PARSED


def email_leads_upsert(rows: list[tuple[str, dict]]) -> list[tuple[EmailLead, bool]]:
    """`email_lead_upsert` for several emails, (dedup_key, fields) each, in the caller's transaction; one
    (lead, complete) per row, in order.

    The rows whose keys are new are written by one INSERT … ON CONFLICT DO NOTHING, in key order, so that
    concurrent batches lock the keys they share in one order. The others (a key already taken, by another
    poll or by an earlier row of the same batch) go one by one through `email_lead_upsert`, in order, as
    if each row had been written alone after the ones before it.
    """
    prepared = [(dedup_key, _email_lead_fields(fields)) for dedup_key, fields in rows]
    first = {}  # dedup_key -> the lead of the first row with that key
    for dedup_key, fields in prepared:
        first.setdefault(dedup_key, EmailLead(dedup_key=dedup_key, **fields))
    with transaction.atomic():
        written = insert_many_on_conflict(
            [first[key] for key in sorted(first)],
            on_conflict="ON CONFLICT (dedup_key) DO NOTHING",
            returning="id, dedup_key",
        )
        inserted = {}
        for pk, dedup_key in written:
            lead = inserted[dedup_key] = first[dedup_key]
            lead.pk, lead._state.adding, lead._state.db = pk, False, connection.alias
        upserted = []
        for dedup_key, fields in prepared:
            lead = inserted.pop(dedup_key, None)  # only the first row of a new key is the inserted one
            if lead is None:
                upserted.append(email_lead_upsert(dedup_key=dedup_key, fields=fields))
            else:
                upserted.append((lead, lead.parse_state == EmailLead.ParseState.PARSED))
    return upserted


def _email_lead_fields(fields: dict) -> dict:
    fields = {
        name: value[: EmailLead._meta.get_field(name).max_length] if isinstance(value, str) else value
        for name, value in fields.items()
    }
    fields["channel"] = EmailLead.Channel.EMAIL
    fields["parse_state"] = EmailLead.ParseState.FAILED if fields["parse_error"] else EmailLead.ParseState.PARSED
    return fields


def _email_lead_refresh(lead: EmailLead, fields: dict) -> None:
    if fields["lead_type"]:
        lead.lead_type = fields["lead_type"]
    store_id = fields.get("store_id")
    if store_id is not None and lead.store_id in (None, store_id):
        lead.store_id, lead.franchise, lead.account_id = store_id, fields["franchise"], fields["account_id"]
    lead.synced_at = fields["synced_at"]
    lead.save(update_fields=EMAIL_LEAD_REFRESHED)


def _lead_overwrite(lead: EmailLead, fields: dict) -> None:
    for name, value in fields.items():
        setattr(lead, name, value)
    lead.save()


def _email_lead_failed(reparse_key: str, dedup_key: str) -> EmailLead | None:
    if reparse_key == dedup_key or EmailLead.objects.filter(dedup_key=dedup_key).exists():
        return None  # the insert below finds it
    failed = EmailLead.objects.filter(dedup_key=reparse_key, parse_state=EmailLead.ParseState.FAILED)
    return failed.select_for_update().first()
