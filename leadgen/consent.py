"""The consent the lead form shows, by version. A lead records the text of the version its person was shown.

A published text is never edited: a new wording is a new version, added here, and becomes the one the form
shows. Older versions stay, so a page loaded before the change still sends a version the server knows, and
the lead records the text that page showed.
"""

CONSENT_TEXTS = {
    "2026-12": (
        "I agree that you keep the details I give here and use them to answer my request and to contact me "
        "about it. I can ask for a copy of them, or for their erasure, at any time."
    ),
}
# The version the form shows now: the last one added.
CONSENT_VERSION = list(CONSENT_TEXTS)[-1]
CONSENT_TEXT = CONSENT_TEXTS[CONSENT_VERSION]
