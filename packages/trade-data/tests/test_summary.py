"""The market summary against hand calculations on the raw table (pandas, independent of the store)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from trade_data.store import MarketStore
from trade_data.summary import market_summary


def _adjusted_close(table: pd.DataFrame, symbol: str, until: str) -> pd.Series:
    rows = table[(table["symbol"] == symbol) & (table["date"] <= until) & (table["volume"] > 0)]
    return (rows["close"] * rows["factor"]).reset_index(drop=True)


@pytest.mark.parametrize("day", ["2019-05-06", "2024-06-14", "2025-09-11"])
def test_summary_matches_hand_calculation(
    sample_store: MarketStore, sample_table: pd.DataFrame, sample_data, day: str
) -> None:  # type: ignore[no-untyped-def]
    summary = market_summary(sample_store.asof(day))
    close = _adjusted_close(sample_table, "SH000001", day)
    assert summary.return_5d == pytest.approx(close.iloc[-1] / close.iloc[-6] - 1, rel=1e-5)
    assert summary.return_20d == pytest.approx(close.iloc[-1] / close.iloc[-21] - 1, rel=1e-5)
    vol = close.pct_change().rolling(20).std()
    assert summary.volatility_20d == pytest.approx(vol.iloc[-1], rel=1e-4)
    past_year = vol.iloc[-252:]
    assert summary.volatility_percentile == pytest.approx((past_year <= vol.iloc[-1]).mean(), abs=1 / 252)
    big, small = _adjusted_close(sample_table, "SH000300", day), _adjusted_close(sample_table, "SH000905", day)
    spread = (big.iloc[-1] / big.iloc[-21] - 1) - (small.iloc[-1] / small.iloc[-21] - 1)
    assert summary.style_spread_20d == pytest.approx(spread, rel=1e-4)
    index_rows = sample_table[(sample_table["symbol"] == "SH000001") & (sample_table["date"] <= day)]
    volume = index_rows["volume"].to_numpy()
    assert summary.volume_ratio_5_20 == pytest.approx(volume[-5:].mean() / volume[-20:].mean(), rel=1e-5)

    intervals = pd.read_csv(sample_data / "csi300.txt", sep="\t", names=["symbol", "start", "end"])
    members = set(intervals[(intervals["start"] <= day) & (intervals["end"] >= day)]["symbol"])
    rows = sample_table[
        sample_table["symbol"].isin(members) & (sample_table["volume"] > 0) & (sample_table["date"] <= day)
    ]
    rows = rows.assign(adj=rows["close"] * rows["factor"]).sort_values(["symbol", "date"])
    rows["prev"] = rows.groupby("symbol")["adj"].shift()
    today = rows[(rows["date"] == day) & rows["prev"].notna()]
    assert (summary.advancers, summary.traded) == (int((today["adj"] > today["prev"]).sum()), len(today))


@pytest.mark.real_data
def test_summary_text_is_compact_chinese_and_marks_synthetic(sample_store: MarketStore) -> None:
    summary = market_summary(sample_store.asof("2024-06-14"))
    text = summary.to_text()
    assert text.splitlines()[0] == "市场状态（截至2024-06-14收盘，上证指数）："
    assert len(text.splitlines()) == 6 and len(text) < 400
    assert "沪深300成分股上涨172/298家（58%）" in text
    assert "【合成数据】" in summary.model_copy(update={"synthetic": True}).to_text()


def test_summary_on_the_first_day_says_history_is_short(sample_store: MarketStore) -> None:
    summary = market_summary(sample_store.asof("2018-01-02"))
    assert math.isnan(summary.return_5d) and math.isnan(summary.volatility_20d)
    assert "历史不足20日" in summary.to_text()
    assert np.isnan(summary.breadth)


def test_summary_of_a_synthetic_market_says_so(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from trade_data.synth import write_synthetic_market

    store = MarketStore.load(
        write_synthetic_market(tmp_path / "synth", symbols=40, start="2021-01-01", end="2022-06-30")
    )
    summary = market_summary(store.asof(store.calendar[-1]))
    assert summary.synthetic and summary.universe == "csi300"
    assert summary.to_text().startswith("【合成数据】市场状态")
    assert summary.traded > 0 and not math.isnan(summary.volatility_percentile)


@pytest.fixture(scope="module")
def synth_store(tmp_path_factory: pytest.TempPathFactory) -> MarketStore:
    from trade_data.synth import write_synthetic_market

    out = tmp_path_factory.mktemp("summary") / "synth"
    return MarketStore.load(write_synthetic_market(out, symbols=60, start="2020-01-01", end="2022-06-30", seed=5))


def _days(store: MarketStore, count: int) -> list[pd.Timestamp]:
    """The first 25 days (short histories), then ``count`` random ones."""
    rng = np.random.default_rng(len(store.calendar))
    return [*store.calendar[:25], *rng.choice(store.calendar[25:], size=count, replace=False)]


@pytest.mark.parametrize("market", ["synth_store", "sample_store"])
def test_the_summary_reads_the_precomputed_rows_and_says_what_the_bars_say(market: str, request) -> None:  # type: ignore[no-untyped-def]
    """Byte for byte the text computed from the view's bars, on every kind of day, for each index and universe;
    a stock named as the index has no table and is computed from its bars."""
    store: MarketStore = request.getfixturevalue(market)
    assert {f"index-{s}" for s in store.indices} | {f"breadth-{u}" for u in store.universe_names} == set(
        store.day_tables
    )
    stock = next(s for s in store.symbols if s not in store.indices)
    for day in _days(store, 60):
        view = store.asof(day)
        for index in [*store.indices, stock]:
            for universe in store.universe_names:
                read = market_summary(view, index=index, universe=universe)
                computed = market_summary(view, index=index, universe=universe, precomputed=False)
                assert read.to_text() == computed.to_text()
                np.testing.assert_equal(read.model_dump(), computed.model_dump())
