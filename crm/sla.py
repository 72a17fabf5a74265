"""Due times of outreach tasks: an SLA after arrival, moved out of the store's quiet hours.

Quiet hours are wall-clock times in the store's time zone and may span
midnight (21:00–08:00). Daylight-saving changes are the time zone's business:
the due time is computed on the local wall clock and converted back, so
"08:00 the next morning" stays 08:00 on the day the clocks change. Equal start
and end mean no quiet hours.
"""

from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo


def in_quiet_hours(local: time, *, start: time, end: time) -> bool:
    if start == end:
        return False
    if start < end:
        return start <= local < end
    return local >= start or local < end  # spans midnight


def past_quiet_hours(moment: datetime, *, zone: ZoneInfo, start: time, end: time) -> datetime:
    """`moment` itself when the store is open then, else the end of that quiet period (in UTC)."""
    local = moment.astimezone(zone)
    wall = local.time().replace(tzinfo=None)
    if not in_quiet_hours(wall, start=start, end=end):
        return moment
    resume_day = local.date() + timedelta(days=1) if start > end and wall >= start else local.date()
    # A resume time the clocks skip that day is read with the offset before the change: 02:30 becomes 03:30.
    resume = datetime.combine(resume_day, end, tzinfo=zone).astimezone(UTC)
    if resume < moment.astimezone(UTC):
        # A resume time the clocks pass twice that day, and `moment` is in the second pass: the second one.
        resume = datetime.combine(resume_day, end.replace(fold=1), tzinfo=zone).astimezone(UTC)
    return resume


def outreach_due_at(*, arrived_at: datetime, sla_minutes: int, zone: ZoneInfo, start: time, end: time) -> datetime:
    # In UTC: adding to a local time would add wall-clock minutes, wrong across a clock change.
    due = arrived_at.astimezone(UTC) + timedelta(minutes=sla_minutes)
    return past_quiet_hours(due, zone=zone, start=start, end=end)
