"""CSV exports that a spreadsheet cannot run: every cell that would start a formula is escaped.

A cell starting with `=`, `+`, `-`, `@`, a tab or a carriage return is read
as a formula by Excel, LibreOffice and Google Sheets (`=HYPERLINK(…)` in a
lead's name becomes a live link in a sales spreadsheet). Such cells get a
leading apostrophe, OWASP's advice for CSV injection: spreadsheets show the
text as typed. A plain signed number or phone number is left as it is.
django-import-export's own IMPORT_EXPORT_ESCAPE_FORMULAE_ON_EXPORT only drops
a leading `=`, which leaves the other five open.
"""

import re

from import_export.formats.base_formats import CSV

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
# A signed number or an international phone number ("+1 415 555 0100", "-12.5") is not a formula: kept as it is.
PLAIN_NUMBER = re.compile(r"[+-]?\d+(?:[ .]\d+)*")


def spreadsheet_safe(value) -> str:
    text = "" if value is None else str(value)
    if text.startswith(FORMULA_STARTS) and not PLAIN_NUMBER.fullmatch(text):
        return "'" + text
    return text


class SafeCSV(CSV):
    def export_data(self, dataset, **kwargs):
        for _ in range(len(dataset)):
            dataset.append([spreadsheet_safe(cell) for cell in dataset.lpop()])
        return super().export_data(dataset, **kwargs)
