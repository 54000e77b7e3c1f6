"""The filters every page formats with (``lanner.web.templating``): money in whole cents, times from the API's
ISO text."""

from __future__ import annotations

from datetime import UTC, datetime

from lanner.web.templating import iso_time, money, when


def test_money_shows_whole_cents_and_less_than_a_cent_as_such() -> None:
    assert money(49_937_200) == "$49.94"  # was $49.9372
    assert money(12_345_678) == "$12.35" and money(12_344_999) == "$12.34"
    assert money(1_000_000_000) == "$1,000.00" and money(0) == "$0.00"
    assert money(4_200) == "<$0.01" and money(4_200, signed=True) == "+<$0.01"  # a few seconds' charge
    assert money(-2_500_000) == "-$2.50" and money(10_000, signed=True) == "+$0.01"
    assert money(None) == ""


def test_times_read_the_apis_iso_text_too() -> None:
    moment = datetime(2026, 12, 4, 13, 5, 9, tzinfo=UTC)
    assert when("2026-12-04T13:05:09Z") == when(moment) == "2026-12-04 13:05 UTC"
    assert when("2026-12-04T13:05:09+00:00", date_only=True) == "2026-12-04"
    assert iso_time("2026-12-04T13:05:09Z") == iso_time(moment) == "2026-12-04T13:05:09Z"
