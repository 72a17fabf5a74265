"""Outreach due times: 5 minutes after arrival, moved past the store's quiet hours in its time zone."""

from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from crm.sla import in_quiet_hours, outreach_due_at

NEW_YORK = ZoneInfo("America/New_York")
NIGHT = {"start": time(21, 0), "end": time(8, 0)}


def due(local: datetime, **quiet) -> datetime:
    """Due time, in local time, of a lead that arrived at `local` (a New York wall-clock time)."""
    arrived = local.replace(tzinfo=NEW_YORK)
    return outreach_due_at(arrived_at=arrived, sla_minutes=5, zone=NEW_YORK, **(quiet or NIGHT)).astimezone(NEW_YORK)


@pytest.mark.parametrize(
    ("arrived", "expected"),
    [
        (datetime(2026, 6, 10, 14, 0), datetime(2026, 6, 10, 14, 5)),  # open: arrival + 5 minutes
        (datetime(2026, 6, 10, 20, 54), datetime(2026, 6, 10, 20, 59)),  # just before quiet hours
        (datetime(2026, 6, 10, 20, 56), datetime(2026, 6, 11, 8, 0)),  # + 5 min falls into them
        (datetime(2026, 6, 10, 23, 30), datetime(2026, 6, 11, 8, 0)),  # evening: next morning
        (datetime(2026, 6, 10, 23, 58), datetime(2026, 6, 11, 8, 0)),  # + 5 min crosses midnight
        (datetime(2026, 6, 11, 3, 0), datetime(2026, 6, 11, 8, 0)),  # after midnight: same morning
        (datetime(2026, 6, 11, 7, 55), datetime(2026, 6, 11, 8, 0)),  # + 5 min is exactly the end
        (datetime(2026, 12, 31, 22, 0), datetime(2027, 1, 1, 8, 0)),  # across the year
    ],
)
def test_due_times_around_quiet_hours(arrived, expected):
    assert due(arrived).replace(tzinfo=None) == expected


def test_across_the_spring_forward_night_the_store_opens_at_8_local():
    # 8 March 2026: New York clocks jump from 02:00 EST to 03:00 EDT.
    result = due(datetime(2026, 3, 7, 23, 0))
    assert result.replace(tzinfo=None) == datetime(2026, 3, 8, 8, 0)
    assert result.astimezone(UTC) == datetime(2026, 3, 8, 12, 0, tzinfo=UTC), "EDT: UTC-4"


def test_across_the_fall_back_night_the_store_opens_at_8_local():
    # 1 November 2026: clocks fall back from 02:00 EDT to 01:00 EST; the night is an hour longer.
    result = due(datetime(2026, 10, 31, 22, 0))
    assert result.astimezone(UTC) == datetime(2026, 11, 1, 13, 0, tzinfo=UTC), "EST: UTC-5"
    arrived = datetime(2026, 11, 1, 1, 30, fold=1, tzinfo=NEW_YORK)  # the second 01:30, in EST
    assert outreach_due_at(arrived_at=arrived, sla_minutes=5, zone=NEW_YORK, **NIGHT) == datetime(
        2026, 11, 1, 13, 0, tzinfo=UTC
    )


def test_a_quiet_period_ending_in_the_skipped_hour_ends_when_the_clocks_have_jumped():
    result = due(datetime(2026, 3, 8, 0, 30), start=time(0, 0), end=time(2, 30))
    assert result.astimezone(UTC) == datetime(2026, 3, 8, 7, 30, tzinfo=UTC)  # 03:30 EDT, just after the jump
    assert result.replace(tzinfo=None) == datetime(2026, 3, 8, 3, 30)


def test_a_quiet_period_ending_in_the_repeated_hour_ends_at_its_second_pass_when_that_is_where_we_are():
    quiet = {"start": time(0, 0), "end": time(1, 30)}
    first_pass = datetime(2026, 11, 1, 1, 5, tzinfo=NEW_YORK)  # EDT
    second_pass = datetime(2026, 11, 1, 1, 5, fold=1, tzinfo=NEW_YORK)  # EST, an hour later
    first = outreach_due_at(arrived_at=first_pass, sla_minutes=5, zone=NEW_YORK, **quiet)
    second = outreach_due_at(arrived_at=second_pass, sla_minutes=5, zone=NEW_YORK, **quiet)
    assert first == datetime(2026, 11, 1, 5, 30, tzinfo=UTC)  # 01:30 EDT
    assert second == datetime(2026, 11, 1, 6, 30, tzinfo=UTC)  # 01:30 EST, never before the arrival


def test_daytime_quiet_hours_and_no_quiet_hours():
    lunch = {"start": time(12, 0), "end": time(13, 0)}
    assert due(datetime(2026, 6, 10, 11, 57), **lunch).replace(tzinfo=None) == datetime(2026, 6, 10, 13, 0)
    assert due(datetime(2026, 6, 10, 13, 0), **lunch).replace(tzinfo=None) == datetime(2026, 6, 10, 13, 5)
    always_open = {"start": time(9, 0), "end": time(9, 0)}
    assert due(datetime(2026, 6, 10, 23, 0), **always_open).replace(tzinfo=None) == datetime(2026, 6, 10, 23, 5)


ZONES = [ZoneInfo(name) for name in ("America/New_York", "America/Los_Angeles", "Europe/London", "Australia/Sydney",
                                     "Asia/Kolkata", "UTC")]  # fmt: skip


@given(
    arrived=st.datetimes(min_value=datetime(2025, 1, 1), max_value=datetime(2028, 1, 1), timezones=st.just(UTC)),
    zone=st.sampled_from(ZONES),
    start=st.times().map(lambda t: t.replace(second=0, microsecond=0)),
    end=st.times().map(lambda t: t.replace(second=0, microsecond=0)),
)
# Open 01:00-01:01 only, and London skips 01:00-02:00 that night: the opening is the clocks' jump (02:00 BST).
@example(arrived=datetime(2025, 3, 29, 1, 0, tzinfo=UTC), zone=ZoneInfo("Europe/London"), start=time(1, 1),
         end=time(1, 0))  # fmt: skip
def test_the_due_time_is_never_early_never_quiet_and_never_later_than_needed(arrived, zone, start, end):
    result = outreach_due_at(arrived_at=arrived, sla_minutes=5, zone=zone, start=start, end=end)
    sla = arrived + timedelta(minutes=5)
    assert result >= sla
    assert result - sla <= timedelta(hours=25), "at most one quiet period, plus a DST hour"
    local_due = sla.astimezone(zone).time()
    if not in_quiet_hours(local_due, start=start, end=end):
        assert result == sla
    else:
        local = result.astimezone(zone)
        # crm.sla: an opening time the clocks skip that day opens at the jump, whose wall time reads as quiet
        # when the whole open window lies in the skipped hour.
        opening = datetime.combine(local.date(), end, tzinfo=zone)
        skipped = opening.astimezone(UTC).astimezone(zone).time() != end
        opens_at_the_jump = skipped and opening.astimezone(UTC) == result
        assert opens_at_the_jump or not in_quiet_hours(local.time(), start=start, end=end), (
            "the task is due when the store is open"
        )
