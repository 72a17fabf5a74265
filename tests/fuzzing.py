"""What the schemathesis tests share: the strategy of the schema's `phone` format, and a rule of every input
that the schema cannot state."""

import schemathesis
from hypothesis import strategies as st

from foundation.db import UNSTORABLE_CHARACTERS

# The schema's `phone` format (leadgen.serializers.PhoneField): numbers their numbering plans assign.
PHONES = ["", "+1 415 555 0100", "(415) 555-0132", "+44 20 7946 0958", "+49 30 901820", "+33 142685300"]
schemathesis.openapi.format("phone", st.sampled_from(PHONES))


def holds(value, pattern) -> bool:
    """Whether `pattern` is found in any text of `value`, keys of objects included."""
    if isinstance(value, str):
        return pattern.search(value) is not None
    if isinstance(value, dict):
        return any(holds(key, pattern) or holds(item, pattern) for key, item in value.items())
    return isinstance(value, list | tuple) and any(holds(item, pattern) for item in value)


def carries_unstorable_text(case) -> bool:
    """Whether the request holds text PostgreSQL cannot store (NUL, an unpaired surrogate) anywhere, keys of
    free-form objects included. Every input refuses it (foundation.parsers, config.middleware): one rule for all,
    which a schema would have to repeat in every string, and cannot state for property names it does not list,
    so schemathesis may send it in a request it takes for valid."""
    parts = (case.body, case.query, case.headers, case.path_parameters)
    return any(holds(dict(part) if hasattr(part, "items") else part, UNSTORABLE_CHARACTERS) for part in parts)
