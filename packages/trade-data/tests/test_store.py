"""MarketStore reads on the real data, checked against the source table computed independently."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pytest

from trade_data.errors import DatasetError
from trade_data.store import MarketStore
from trade_data.symbols import PRICE_LIMITS, Board, board_of, limit_fractions, limit_pct


def test_window_matches_source_rows_and_skips_suspensions(
    sample_store: MarketStore, sample_table: pd.DataFrame
) -> None:
    rows = sample_table[(sample_table["symbol"] == "SH600027") & (sample_table["date"] <= "2024-08-02")]
    traded = rows[rows["volume"] > 0].tail(20)
    bars = sample_store.asof("2024-08-02").window("SH600027", 20, adjusted=False)
    assert list(bars.dates) == list(traded["date"].to_numpy().astype("datetime64[D]"))
    np.testing.assert_array_equal(bars.close, traded["close"])
    np.testing.assert_array_equal(bars.open, traded["open"])
    np.testing.assert_allclose(bars.volume, traded["volume"], rtol=1e-6)
    adjusted = sample_store.asof("2024-08-02").window("SH600027", 20)
    np.testing.assert_allclose(adjusted.close, traded["close"] * traded["factor"], rtol=1e-6)


def test_window_is_shorter_near_the_start_and_rejects_bad_lengths(sample_store: MarketStore) -> None:
    assert len(sample_store.asof("2018-01-04").window("SH600519", 20)) == 3
    with pytest.raises(DatasetError, match="at least 1"):
        sample_store.asof("2018-01-04").window("SH600519", 0)


@pytest.mark.real_data
def test_cross_section_flags_and_raw_prices(sample_store: MarketStore) -> None:
    view = sample_store.asof("2020-01-02")
    section = view.cross_section(["SZ000001", "SH600519"])
    assert section["close"][0] == 16.87
    assert not section["suspended"].any()
    suspended = sample_store.asof("2024-07-22").cross_section(["SH600027"])  # volume-less placeholder row
    assert suspended["suspended"][0] and np.isnan(suspended["close"][0])
    assert sample_store.asof("2024-07-22").is_suspended("SH600027")
    assert sample_store.asof("2024-07-22").last_close("SH600027") == 6.08


def test_limit_flags_match_an_independent_row_by_row_check(
    sample_store: MarketStore, sample_table: pd.DataFrame
) -> None:
    symbols = ["SZ300750", "SZ300059", "SH688981", "SH600519", "SZ002594", "SH601012", "SZ300014"]
    for symbol in symbols:
        rows = sample_table[(sample_table["symbol"] == symbol) & (sample_table["volume"] > 0)]
        previous_close = previous_factor = None
        expected_up, expected_down = set(), set()
        for row in rows.itertuples():
            if previous_close is not None:
                reference = round(previous_close * previous_factor / row.factor + 1e-9, 2)
                pct = limit_pct(symbol, row.date.date())
                assert pct is not None
                if row.close >= round(reference * (1 + pct) + 1e-9, 2) - 1e-6:
                    expected_up.add(row.date.date())
                if row.close <= round(reference * (1 - pct) + 1e-9, 2) + 1e-6:
                    expected_down.add(row.date.date())
            previous_close, previous_factor = row.close, row.factor
        j = sample_store.column[symbol]
        got_up = {d.date() for d in sample_store.calendar[sample_store.limit_up[:, j]]}
        got_down = {d.date() for d in sample_store.calendar[sample_store.limit_down[:, j]]}
        assert got_up == expected_up, symbol
        assert got_down == expected_down, symbol
    assert sample_store.limit_up.sum() > 1000  # limit-up closes are common in A-shares


def test_chinext_limit_widens_on_2020_08_24(sample_store: MarketStore) -> None:
    j = [j for j, s in enumerate(sample_store.symbols) if board_of(s) is Board.CHINEXT]
    change = sample_store.adjusted["close"][:, j] / sample_store.previous_close[:, j] - 1
    up = sample_store.limit_up[:, j]
    switch = sample_store.day_index("2020-08-24")
    assert np.nanmax(np.where(up[:switch], change[:switch], np.nan)) < 0.105
    assert np.nanmin(np.where(up[switch:], change[switch:], np.nan)) > 0.19


def test_the_limit_table_dates_each_board_regime() -> None:
    before, after = dt.date(2020, 8, 21), dt.date(2020, 8, 24)
    assert (limit_pct("SZ300750", before), limit_pct("SZ300750", after)) == (0.10, 0.20)
    assert (limit_pct("SH600519", after), limit_pct("SH688981", after), limit_pct("BJ430047", after)) == (0.1, 0.2, 0.3)
    assert limit_pct("SH000300", after) is None
    fractions = limit_fractions(["SZ300750", "SH000300", "SH688981"], [before, after])
    np.testing.assert_array_equal(fractions, [[0.10, np.nan, 0.20], [0.20, np.nan, 0.20]])


@pytest.mark.real_data
def test_limit_flags_are_the_views_reading_under_the_table(sample_store: MarketStore) -> None:
    """The store's flags and a view's reading under any table come from one rule; another table, other flags."""
    day = "2024-10-08"  # a broad rally: limit-ups on every board
    view, t = sample_store.asof(day), sample_store.day_index(day)
    stocks = view.members("csi300")
    columns = [sample_store.column[s] for s in stocks]
    up = [view.at_limit_up(s) for s in stocks]
    assert up == list(sample_store.limit_up[t, columns]) and 5 < sum(up) < len(stocks)
    wide = tuple(limit._replace(fraction=0.3) for limit in PRICE_LIMITS)
    assert not any(view.at_limit_up(s, wide) or view.at_limit_down(s, wide) for s in stocks)
    narrow = tuple(limit._replace(fraction=0.01) for limit in PRICE_LIMITS)
    narrow_up = np.array([view.at_limit_up(s, narrow) for s in stocks])
    with np.errstate(invalid="ignore"):
        rose = sample_store.adjusted["close"][t, columns] > 1.02 * sample_store.previous_close[t, columns]
    assert narrow_up[rose & sample_store.traded[t, columns]].all() and narrow_up.sum() > sum(up)


def test_calendar_arithmetic(sample_store: MarketStore) -> None:
    assert sample_store.shift("2025-06-20", 59) == dt.date(2025, 9, 11)  # the tutorial's 60-day backtest
    assert sample_store.shift("2024-06-14", 1) == dt.date(2024, 6, 17)
    assert sample_store.shift("2024-06-17", -1) == dt.date(2024, 6, 14)
    with pytest.raises(DatasetError, match="outside the dataset's calendar"):
        sample_store.shift("2025-12-30", 3)
    with pytest.raises(DatasetError, match="2024-06-15 is not a trading day") as weekend:
        sample_store.asof("2024-06-15")
    assert weekend.value.hint == "the trading day before is 2024-06-14"
    with pytest.raises(DatasetError, match="outside the dataset"):
        sample_store.asof("2017-06-15")
    with pytest.raises(DatasetError, match="not a date"):
        sample_store.asof("yesterday")


def test_universe_members_follow_the_membership_intervals(sample_store: MarketStore, sample_data) -> None:  # type: ignore[no-untyped-def]
    intervals = pd.read_csv(sample_data / "csi300.txt", sep="\t", names=["symbol", "start", "end"])
    for day in ("2018-01-02", "2020-06-15", "2023-12-11", "2025-12-31"):
        expected = set(intervals[(intervals["start"] <= day) & (intervals["end"] >= day)]["symbol"])
        members = set(sample_store.asof(day).members("csi300"))
        assert members == expected & set(sample_store.asof(day).symbols())  # members with bars by that day
        assert 285 <= len(members) <= 300
    with pytest.raises(DatasetError, match="unknown universe 'csi800'"):
        sample_store.asof("2020-06-15").members("csi800")


def test_symbols_listed_later_are_unknown_before_their_first_bar(sample_store: MarketStore) -> None:
    j = int(np.argmax(sample_store.first_day))
    late, first = sample_store.symbols[j], sample_store.calendar[sample_store.first_day[j]].date()
    assert late in sample_store.asof(first).symbols()
    before = sample_store.asof(sample_store.shift(first, -1))
    assert late not in before.symbols() and late not in before.members("all")
    with pytest.raises(DatasetError, match=f"unknown symbol '{late}'"):
        before.window(late, 5)
