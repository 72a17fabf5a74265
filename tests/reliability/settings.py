"""Settings of the fault suite's worker processes: the production settings with anymail's timeout short,
so an answer the fault proxy withholds costs a second, not anymail's default 30."""

from config.settings import *  # noqa: F403

ANYMAIL = {**ANYMAIL, "REQUESTS_TIMEOUT": 1.0}  # noqa: F405
