"""A paginator for the admin's large tables: counts at most CAP rows, never the whole table.

COUNT(*) over a filtered 100,000-row table costs more than the page itself;
past CAP rows nobody pages by number anyway. Django's changelist asks
`paginator.count` once per page (with `show_full_result_count = False`).
"""

from django.core.paginator import Paginator
from django.utils.functional import cached_property

CAP = 10_000


class CappedCountPaginator(Paginator):
    """The count is exact up to CAP rows, and CAP beyond: pages past CAP are not offered."""

    cap = CAP

    @cached_property
    def count(self):
        return self.object_list[: self.cap].count()
