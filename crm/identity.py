"""Who someone is: the contact of their store, or of the shared pool, known by the same email or phone.

A contact is matched on two keys, each within the lead's store (leads of no store share one pool):
- the email, trimmed and lower-cased;
- the phone, as E.164.
No match: a new contact. One contact matches: it gains what it lacks (a missing email, phone, name, company),
nothing it has is overwritten, and its last activity only moves forward. The email matches one contact and the
phone another: the email's contact, and the other stays as it is, a likely duplicate for staff to merge.

Concurrent arrivals for one person make one contact: before the lookup, the transaction takes an advisory lock
on each of its keys (store, email) and (store, phone), in one global order, so two resolutions sharing a key run
one after the other and the second finds what the first wrote. Whoever writes a contact's email or phone holds
that key's lock (`identity_lock`); the partial unique indexes of Contact are the backstop.
"""

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import phonenumbers
from django.conf import settings
from django.db import connection
from django.db.models import Case, DateTimeField, F, Q, Value, When
from django.db.models.functions import Coalesce, Greatest
from django.utils import timezone

from crm.models import Contact
from foundation.db import insert_many_on_conflict

# Filled when empty, never overwritten; the email and the phone only when no other contact of the store has them.
FILLED_FIELDS = ("email", "phone", "first_name", "last_name", "company", "franchise", "account_id")


def email_key(text: str) -> str:
    """The email as contacts are matched on: trimmed and lower-cased ("" for none)."""
    return text.strip().lower()


def phone_key(text: str) -> str:
    """The phone as E.164 (read in PHONE_DEFAULT_REGION without a +country), "" when it is not a phone number."""
    text = text.strip()
    if not text:
        return ""
    try:
        number = phonenumbers.parse(text, settings.PHONE_DEFAULT_REGION)
    except phonenumbers.NumberParseException:
        return ""
    if not phonenumbers.is_possible_number(number):
        return ""
    return phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)


@dataclass(frozen=True)
class Person:
    """What an arrival says about someone; `email` and `phone` already normalized (email_key, phone_key)."""

    email: str = ""
    phone: str = ""
    first_name: str = ""
    last_name: str = ""
    company: str = ""
    franchise: str = ""
    account_id: str = ""

    def values(self) -> dict[str, str]:
        """The contact's columns, each cut to its length (a docs reader's name may be longer than a lead's)."""
        return {name: getattr(self, name)[: Contact._meta.get_field(name).max_length] for name in FILLED_FIELDS}


def _lock_id(store_id: int | None, kind: str, value: str) -> int:
    # A signed 64-bit id from a stable digest: Python's hash() differs per process.
    digest = hashlib.blake2b(f"crm.contact:{store_id or 'pool'}:{kind}:{value}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def _lock_ids(store_id: int | None, *, emails=(), phones=()) -> set[int]:
    return {_lock_id(store_id, "email", email) for email in emails if email} | {
        _lock_id(store_id, "phone", phone) for phone in phones if phone
    }


def _locks_take(ids) -> None:
    """Advisory locks on `ids` until the transaction ends, in ascending order, so two transactions never wait on
    each other's second key."""
    ids = sorted(ids)
    if not ids:
        return
    with connection.cursor() as cursor:
        # One round trip: the select list is evaluated left to right.
        cursor.execute("SELECT " + ", ".join(["pg_advisory_xact_lock(%s)"] * len(ids)), ids)


def identity_lock(*, store_id: int | None, emails=(), phones=()) -> None:
    """Lock these keys of the store (None: the shared pool) until the transaction ends."""
    _locks_take(_lock_ids(store_id, emails=emails, phones=phones))


def _in_store(store_id: int | None) -> Q:
    return Q(store_id=store_id) if store_id is not None else Q(store__isnull=True)


Arrival = tuple[int | None, Person, datetime]  # (store id or None for the shared pool, who, seen at)


def _rounds(arrivals: Sequence[Arrival]) -> list[list[int]]:
    """The arrivals' positions in rounds: an arrival goes in the round after the last one holding any of its keys,
    so arrivals that share a key resolve one after the other, in order, and the rest together."""
    rounds: list[list[int]] = []
    last: dict[tuple, int] = {}
    for position, (store_id, person, _) in enumerate(arrivals):
        keys = [(store_id, kind, value) for kind, value in (("email", person.email), ("phone", person.phone)) if value]
        number = 1 + max((last[key] for key in keys if key in last), default=-1)
        if number == len(rounds):
            rounds.append([])
        rounds[number].append(position)
        last.update(dict.fromkeys(keys, number))
    return rounds


def contacts_resolve(arrivals: Sequence[Arrival]) -> list[int]:
    """The id of the contact each arrival's person is at its store (None: the shared pool), created or completed.

    `seen at`: when they were seen (a lead's arrival); the contact's last activity moves up to it, never back.
    Must run in a transaction (the keys' locks are held until it ends). Writes only what changes: resolving the
    same arrival again leaves the contact exactly as it was. The result is what resolving the arrivals one after
    another would give; the keys are locked, the contacts read and the new ones inserted once per round
    (`_rounds`), not once per arrival.
    """
    for _, person, _ in arrivals:
        if not (person.email or person.phone):
            raise ValueError("a contact is known by an email or a phone")
    _locks_take(set().union(*(_lock_ids(s, emails=[p.email], phones=[p.phone]) for s, p, _ in arrivals)))
    resolved: list[int] = [0] * len(arrivals)
    for positions in _rounds(arrivals):
        _round_resolve([arrivals[position] for position in positions], positions, resolved)
    return resolved


def _round_resolve(arrivals: list[Arrival], positions: list[int], resolved: list[int]) -> None:
    """Arrivals that share no key, resolved together into `resolved` at their positions."""
    wanted = Q()
    for store_id, person, _ in arrivals:
        keys = Q()
        if person.email:
            keys |= Q(email=person.email)
        if person.phone:
            keys |= Q(phone=person.phone)
        wanted |= _in_store(store_id) & keys
    # Most recently active first (Contact's ordering): of several matches, that one is the person.
    matches = list(Contact.objects.filter(wanted).values("pk", "store_id", "email", "phone"))
    new = []
    for position, (store_id, person, seen_at) in zip(positions, arrivals, strict=True):
        of_store = [c for c in matches if c["store_id"] == store_id]
        by_email = next((c for c in of_store if person.email and c["email"] == person.email), None)
        by_phone = next((c for c in of_store if person.phone and c["phone"] == person.phone), None)
        found = by_email or by_phone
        if found is None:
            contact = Contact(
                store_id=store_id, **person.values(), last_activity_at=seen_at,
                lifecycle_stage=Contact.LifecycleStage.LEAD, lead_status=Contact.LeadStatus.NEW,
            )  # fmt: skip
            new.append((position, contact))
            continue
        fills = person.values()
        if by_email is not None:
            fills.pop("email")  # it has it
        if by_phone is not None:
            fills.pop("phone")  # it has it, or another contact does (a likely duplicate, left for staff)
        _contact_complete(found["pk"], {name: value for name, value in fills.items() if value}, seen_at)
        resolved[position] = found["pk"]
    # A plain INSERT: under the keys' locks nobody else writes them, and a unique index that still objects
    # (a writer that skipped the locks) fails the transaction, to be retried. Matched on their keys: within a
    # round, no two new contacts share one.
    rows = insert_many_on_conflict([c for _, c in new], on_conflict="", returning="id, store_id, email, phone")
    ids = {(store_id, email, phone): pk for pk, store_id, email, phone in rows}
    for position, contact in new:
        resolved[position] = ids[(contact.store_id, contact.email, contact.phone)]


def contact_resolve(*, store_id: int | None, person: Person, seen_at: datetime) -> int:
    """`contacts_resolve` of one arrival."""
    return contacts_resolve([(store_id, person, seen_at)])[0]


def _contact_complete(contact_id: int, fills: dict[str, str], seen_at: datetime) -> None:
    """Fill the empty ones of `fills` and move last activity up to `seen_at`, in one statement that matches
    nothing when it would change nothing (so updated_at stays). Each column is decided in the database, against
    the row as it is then: another writer of the same contact may have got there first."""
    seen = Value(seen_at, output_field=DateTimeField())
    changes = Q(last_activity_at__isnull=True) | Q(last_activity_at__lt=seen_at)
    for name in fills:
        changes |= Q(**{name: ""})
    Contact.objects.filter(changes, pk=contact_id).update(
        **{name: Case(When(**{name: ""}, then=Value(value)), default=F(name)) for name, value in fills.items()},
        last_activity_at=Greatest(Coalesce(F("last_activity_at"), seen), seen),
        updated_at=timezone.now(),
    )
