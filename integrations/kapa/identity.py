"""The Kapa owner id of a signed-in user, computed here and nowhere else.

Kapa files a user's chat threads under the `external_owner_id` their session was
minted with. The docs site mints sessions with sha256(KAPA_OWNER_SALT + sub) as
lowercase hex, and every reader must compute the very same string: another salt,
order or encoding finds none of the user's history (and orphans it for good).
"""

import hashlib

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


def kapa_owner_id(sub: str) -> str:
    """sha256(salt + sub), hex: the identity provider's subject never reaches Kapa."""
    salt = settings.KAPA_OWNER_SALT
    if not salt:
        # Unsalted, the id of a known sub could be computed by anyone; and it would not
        # match the docs site's sessions anyway.
        raise ImproperlyConfigured("KAPA_OWNER_SALT must be set, to the salt the docs site mints Kapa sessions with")
    return hashlib.sha256((salt + sub).encode()).hexdigest()
