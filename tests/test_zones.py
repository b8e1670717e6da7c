"""Project time zones: Procore's zone names, IANA names, and a safe fallback to UTC."""
from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import pytest

from services.project_system.zones import UTC, ZONE_BY_NAME, local_date, project_zone


def test_every_procore_zone_name_loads_a_real_zone():
    assert len(ZONE_BY_NAME) > 140
    for name, key in ZONE_BY_NAME.items():
        zone = project_zone(name)
        assert zone.key == key, name
        # A zone that only loaded its name would still answer; make it convert an instant.
        dt.datetime(2026, 6, 1, 12, tzinfo=dt.timezone.utc).astimezone(zone)


@pytest.mark.parametrize(("name", "key"), [
    ("Pacific Time (US & Canada)", "America/Los_Angeles"),
    ("Eastern Time (US & Canada)", "America/New_York"),
    ("Arizona", "America/Phoenix"),
    ("  Central Time (US & Canada) ", "America/Chicago"),
    ("America/Denver", "America/Denver"),
    ("Australia/Perth", "Australia/Perth"),
])
def test_zone_names_and_iana_keys_are_both_accepted(name, key):
    assert project_zone(name) == ZoneInfo(key)


@pytest.mark.parametrize("name", [None, "", "   ", "Mars Standard Time", "../../etc/passwd",
                                  "/etc/localtime", "America/Nowhere", "x" * 500])
def test_unknown_or_hostile_names_fall_back_to_utc(name):
    assert project_zone(name) is UTC


def test_local_date_follows_daylight_saving():
    pacific = project_zone("Pacific Time (US & Canada)")
    # 07:30 UTC is 23:30 the day before in winter (UTC-8) but 00:30 the same day in summer (UTC-7).
    assert local_date(dt.datetime(2026, 1, 10, 7, 30, tzinfo=dt.timezone.utc), pacific) == \
        dt.date(2026, 1, 9)
    assert local_date(dt.datetime(2026, 7, 10, 7, 30, tzinfo=dt.timezone.utc), pacific) == \
        dt.date(2026, 7, 10)


def test_a_time_at_the_calendars_edge_is_shown_in_utc_not_a_crash():
    """A time kept from before times were bounded (year 9999 or year 1) cannot move to a
    jobsite's clock; it is shown in UTC instead of failing the page or document."""
    from services.project_system.zones import on_clock

    edge = dt.datetime(9999, 12, 31, 23, 59, tzinfo=dt.timezone.utc)
    assert on_clock(edge, ZoneInfo("Pacific/Kiritimati")) == "9999-12-31 23:59 UTC"
    assert on_clock("0001-01-01T00:00:00Z", ZoneInfo("America/Los_Angeles")) == "0001-01-01 00:00 UTC"
